"""A shipped level_max_rewards.json is a claim: set beside what verification found.

Per level: the claimed max reward, the max envforge found (search, doing nothing and every other
rollout it saw on the level) and a status:
  * "confirmed"   — they agree, and the max is proved (an exhaustive search, or a declared bound met);
  * "reached"     — a replayed witness scores the claim, but nothing proves more is impossible: the
    claim is a lower bound (the search stops on reaching it, which proves nothing);
  * "beaten"      — envforge scored more than the claim: normalized scores against it exceed 1;
  * "unreachable" — a proved max is less (an exhaustive search, or a declared bound met), or the
    claim is above the DSL's reward bound (which no step the search took broke): no action
    sequence reaches the claim (`why` says which);
  * "unconfirmed" — a budget-limited search scored less: the claim may hold, it was not reached.
"beaten" and "unreachable" are flagged. Verify only reports claims; it never rewrites them
unless told to write into the folder.
"""
from __future__ import annotations

from envforge.pipeline import layout
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.kinds import ClaimCheck

EPS = 1e-6
FLAGGED = ("beaten", "unreachable")


def read_claims(spec: EnvSpec) -> dict[str, float]:
    """Level name (without `.yaml`) -> claimed max reward, from the folder's level_max_rewards.json
    as EnvSpec read it (bounded, never through a link, finite numbers only)."""
    return {key.removesuffix(".yaml"): value for key, value in spec.max_rewards.items()}


def compare(claims: dict[str, float], found: list) -> dict[str, ClaimCheck]:
    """Per shipped level (a LevelMax) with a claim, by level key: the claim checked."""
    out = {}
    for lm in found:
        name = lm.source.rsplit("/", 1)[-1].removesuffix(".yaml")
        claimed = claims.get(name)
        if claimed is None:
            continue
        best_seen = lm.best_seen
        if best_seen > claimed + EPS:
            status = "beaten"
        elif best_seen >= claimed - EPS:
            status = "confirmed" if lm.exact else "reached"
        else:
            status = "unreachable" if lm.search_exhaustive or lm.exact else "unconfirmed"
        why = None
        if status == "unreachable":
            why = (f"an exhaustive search scores only {best_seen:g}" if lm.search_exhaustive else
                   f"the proved max is {best_seen:g}")
        elif status == "unconfirmed" and lm.upper_bound is not None and claimed > lm.upper_bound + EPS:
            status, why = "unreachable", f"the DSL's reward bound is {lm.upper_bound:g}"
        out[layout.level_key(lm.source)] = ClaimCheck(claimed, round(best_seen, 6), status,
                                                      exhaustive=lm.search_exhaustive, exact=lm.exact, why=why)
    return out


def summary(compared: dict[str, ClaimCheck]) -> str:
    flagged = {k: v for k, v in compared.items() if v.standing in FLAGGED}
    counts: dict[str, int] = {}
    for v in compared.values():
        counts[v.standing] = counts.get(v.standing, 0) + 1
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    if flagged:
        text += "; flagged: " + "; ".join(
            f"{k} claims {v.claimed:g}, " + (f"envforge scored {v.found:g}" if v.standing == "beaten" else
                                             v.why or f"the proved max is {v.found:g}")
            for k, v in list(flagged.items())[:5])
    return text
