"""Environment-adaptive selection of the learning method (beyond the paper): successive halving.

On each environment, every method starts; after iteration r (a rung) the methods are ranked by
their cheap early evidence — the best *training* reward any of their candidates has reached so
far — and the better half goes on (ties: fewer tokens, then the table's order). At the last
iteration, or with one method left, the best is chosen; it runs to the end and its final
candidate's test score is the adaptive learner's score. Test levels are never looked at.

It is computed from the study's logged runs: a method's search up to iteration r is the same
whether or not it goes on afterwards, so the choices and the cost are exactly those of a live
run. The cost counts every method up to the last rung it reached, the chosen one to the end.
Reported next to the best single method as the share of the upper-bound gap it closes:
(adaptive - best single) / (UpperBound(all) - best single).
"""
from __future__ import annotations

import math
import statistics

ETA = 2  # keep 1/ETA of the methods at each rung


def successive_halving(progress: dict[str, list[dict]], iterations: int) -> dict:
    """`progress[method]`: for iterations 1..T, {"best_train", "tokens", "dollars"} with the
    cumulative learning cost up to that iteration. Returns the chosen method, the rungs, the cost."""
    alive = [m for m in progress if progress[m]]
    rungs: list[list[str]] = []
    reached = {m: 0 for m in alive}
    chosen = None
    for r in range(1, iterations + 1):
        if not alive:
            break
        for m in alive:
            reached[m] = r
        rungs.append(list(alive))
        alive.sort(key=lambda m: (-_at(progress[m], r, "best_train", -1.0), _at(progress[m], r, "tokens", 0),
                                  list(progress).index(m)))
        if r < iterations and len(alive) > 1:
            alive = alive[:math.ceil(len(alive) / ETA)]
        if r == iterations or len(alive) == 1:
            chosen = alive[0]
            reached[chosen] = iterations  # it runs to the end
            break
    cost = {k: sum(_at(progress[m], reached[m], k, 0) for m in reached) for k in ("tokens", "dollars")}
    return {"chosen": chosen, "rungs": rungs, "tokens": cost["tokens"], "dollars": round(cost["dollars"], 6)}


def _at(series: list[dict], iteration: int, key: str, default):
    known = [p for p in series if p["iteration"] <= iteration and p.get(key) is not None]
    return known[-1][key] if known else default


def adaptive(scores: dict[str, dict[str, float | None]], progress: dict[str, dict[str, list[dict]]],
             envs: list[str], iterations: int) -> dict:
    """Per environment: successive halving's choice, its test score and cost; and the mean."""
    per_env = {}
    for env in envs:
        choice = successive_halving({m: progress[m].get(env, []) for m in progress}, iterations)
        choice["score"] = scores.get(choice["chosen"], {}).get(env) if choice["chosen"] else None
        per_env[env] = choice
    values = [c["score"] for c in per_env.values()]
    mean = statistics.fmean(values) if values and None not in values else None
    return {"envs": per_env, "score": mean,
            "tokens_per_env": statistics.fmean(c["tokens"] for c in per_env.values()) if per_env else 0,
            "dollars_per_env": statistics.fmean(c["dollars"] for c in per_env.values()) if per_env else 0.0}


def gap_closed(adaptive_score: float | None, best_single: float | None, bound: float | None) -> float | None:
    """Share of the gap between the best single method and the upper bound that `adaptive_score` closes."""
    if None in (adaptive_score, best_single, bound) or bound - best_single <= 1e-12:
        return None
    return (adaptive_score - best_single) / (bound - best_single)
