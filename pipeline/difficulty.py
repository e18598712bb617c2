"""How hard a level is: its difficulty profile, from the evidence verify has: the certifying
search of the levels stage (pipeline/levelmax.py), the reliability stage's seeded random episodes
and constant policies, and one breadth-first search it runs beside them with the one search
(planner.search; inside the worker: pipeline/sandbox/inside/search.py).

Every figure is counted in nodes, steps and seeded episodes, never seconds, so the same command
gives the same profile on an idle and on a loaded machine. Each says whether it is exact or a bound:

  * shortest_witness: the fewest steps reaching the level's max. The breadth-first search, over
    states keyed with the step, ends after the depth at which its best first meets the max, so when
    it meets it that depth is exact. When its `profile_nodes` run out first, every shorter path was
    stepped (a lower bound: the depth it reached + 1) and the certified witness's length is an upper
    bound; the value is that upper bound ("range").
  * nodes_to_max: the nodes the certifying search (best-first steered by the DSL, its node budget
    over all passes) had stepped when it first reached the max it kept: exact when that max is
    proved, else the nodes to the best it found ("lower_bound" of the nodes to the true max).
  * branching: distinct successor states per state, the mean over the states the breadth-first
    search expanded (exact when it expanded every reachable one, else a sample of them).
  * random_success_rate and random_normalized: over the reliability stage's seeded random
    episodes (the random agent of `evaluate --agent random`, the same seeds): the share scoring the
    max, and the mean normalized reward (total / max, capped at 1). Samples.
  * best_constant_normalized: the best normalized reward of a declared action repeated to the end
    (the reliability stage's constant policies; exact on a level without chance).

The score (SCORE_VERSION 1), 0 easiest .. 100 hardest:
    depth  = log(shortest_witness) / log(64)           1 step 0, 64 or more 1
    search = log(nodes_to_max) / log(100,000)          1 node 0, 100,000 or more 1
    luck   = max(random_normalized, best_constant_normalized)   what play without skill gets
    score  = round(100 * (depth + search) / 2 * (1 - luck) ** 2)
each part capped to 0..1. The bands are fixed ranges of it: easy 0..39, medium 40..59, hard
60..100 (BANDS, in pipeline/kinds.py beside the profile). What play without skill earns weighs
most, as it does for a learner, which gets reward only where its exploration finds it: a level a
random agent solves one episode in five is easy even 9 steps deep; one it never solves is easy
only when a few steps and a few dozen nodes solve it (4 steps and 50 nodes: 34); a 6-step
solution a guided search finds in 150 nodes is medium (43) and a 28-step one it needs 9,000 nodes
for is hard (80). The scales are absolute (not the level's step cap), so the score orders levels
across environments. A trivial level (doing nothing or one action repeated
scores its max, or one step solves it) is named
(`trivial`), whatever its score.
"""
from __future__ import annotations

import math
from pathlib import Path
from statistics import mean

from envforge.pipeline import layout, planner, records
from envforge.pipeline.errors import UserError
from envforge.pipeline.kinds import (  # the bands are declared beside the profile; here they are re-exported
    BANDS,
    DifficultyFigure,
    DifficultyProfile,
    Verification,
    band_of,
    band_range,  # noqa: F401
)
from envforge.pipeline.levelmax import EPS, LevelMax, scorable
from envforge.pipeline.sandbox.outside.client import EnvClient

PROFILE_NODES = 5_000  # breadth-first nodes per level for the profile (a budget, never seconds)
PROFILE_SECONDS = 300.0  # its wall-clock safety stop only (a profile it cut is left out: see `profile`)
SCORE_VERSION = 1
DEPTH_RANGE = (1, 64)  # shortest witness lengths scoring 0 and 1 of the depth part (log scale between)
NODES_RANGE = (1, 100_000)  # nodes to the max scoring 0 and 1 of the search part (log scale between)


def part(value: float, low: float, high: float) -> float:
    """Where `value` sits between `low` (0) and `high` (1) on a log scale, capped to 0..1."""
    return min(1.0, max(0.0, math.log(max(value, 1e-9) / low) / math.log(high / low)))


def score(shortest: float, nodes: float, random_normalized: float, constant_normalized: float) -> int:
    """The ordinal score of the module docstring."""
    skill = (part(shortest, *DEPTH_RANGE) + part(nodes, *NODES_RANGE)) / 2
    return round(100 * skill * (1 - min(1.0, max(0.0, random_normalized, constant_normalized))) ** 2)


def profile(spec, worker: EnvClient, lm: LevelMax, random_totals: list[float], constant_totals: list[float],
            nodes: int = PROFILE_NODES, trivial: str = "", chance: bool = False) -> DifficultyProfile | None:
    """The difficulty profile of the level `lm` (certified; `worker` holds its environment) from the
    totals of its seeded random episodes and of its declared constant policies; None when its max
    is unknown or not positive (nothing to measure against) or the search's safety stop cut it (a
    figure that would depend on load). `chance`: the environment draws random numbers as it steps,
    so no figure of one chance outcome is exact."""
    if not scorable(lm):
        return None
    worker.reset(lm.source)
    found = planner.search(worker, spec, max_nodes=nodes, seconds=PROFILE_SECONDS, order="breadth",
                           time_in_key=True, stop_at=lm.max_reward)
    if found.cut_by_clock:
        return None
    met = found.target_at is not None
    exact = not chance
    if met:
        shortest = DifficultyFigure(found.target_depth, exact, "exact" if exact else "sample")
    else:
        most = len(lm.witness) if lm.certainty in ("certified", "lower_bound") and lm.witness else None
        least = found.depth_reached + 1
        if most is not None and most <= least:  # the witness is as short as any path could be
            shortest = DifficultyFigure(most, exact, "exact" if exact else "sample")
        else:
            shortest = DifficultyFigure(most if most is not None else least, False,
                                        "range" if most is not None else "lower_bound", at_least=least, at_most=most)
    proved = lm.exact and exact
    to_max = DifficultyFigure(lm.nodes_to_best, proved, "exact" if proved else "lower_bound",
                              at_least=None if proved else lm.nodes_to_best)
    branching = DifficultyFigure(round(found.successors / found.expanded, 3) if found.expanded else 0.0,
                                 found.exhausted and exact, "exact" if found.exhausted and exact else "sample")
    normalized = [min(1.0, t / lm.max_reward) for t in random_totals]
    success = DifficultyFigure(round(mean(t >= lm.max_reward - EPS for t in random_totals), 4) if random_totals
                               else 0.0, False, "sample")
    random_mean = DifficultyFigure(round(mean(normalized), 4) if normalized else 0.0, False, "sample")
    constant = DifficultyFigure(round(max((min(1.0, t / lm.max_reward) for t in constant_totals), default=0.0), 4),
                                exact, "exact" if exact else "sample")
    value = score(shortest.value, to_max.value, random_mean.value, constant.value)
    return DifficultyProfile(value, band_of(value), SCORE_VERSION, shortest, to_max, branching, success,
                             random_mean, constant, nodes, trivial or None)


def shown(figure: DifficultyFigure) -> str:
    """A figure in words: "12", "12 (exact)", "8..12", ">= 5000"."""
    value = f"{figure.value:g}" if isinstance(figure.value, (int, float)) else "?"
    if figure.exact:
        return f"{value} (exact)"
    if figure.basis == "range":
        return f"{figure.at_least:g}..{figure.at_most:g}"
    if figure.basis == "lower_bound":
        return f">= {figure.at_least:g}"
    return value


def line(p: DifficultyProfile) -> str:
    """A profile in one line, as verify and review print it."""
    return (f"difficulty {p.score} ({p.band}): shortest witness {shown(p.shortest_witness)}, "
            f"nodes to max {shown(p.nodes_to_max)}, branching {shown(p.branching)}, random success "
            f"{p.random_success_rate.value:.0%} (normalized {p.random_normalized.value:.2f}), best constant "
            f"{p.best_constant_normalized.value:.2f}" + (f"; trivial: {p.trivial}" if p.trivial else ""))


def recorded(env_dir: Path) -> tuple[dict[str, str], dict[str, int]]:
    """What verify recorded in the folder's verification.json of its levels: (level -> why it is
    trivial, band -> how many levels are in it); both empty when it recorded none or does not read."""
    try:
        verification = records.read(env_dir / layout.VERIFICATION, Verification)  # None: no such file
    except (OSError, UserError):  # a RecordError is one
        return {}, {}
    rel = verification.stages.reliability if verification is not None else None
    return (rel.trivial_levels or {}, rel.difficulty_bands or {}) if rel is not None else ({}, {})


def histogram(scores: list[int]) -> dict[str, int]:
    """How many scores fall in each band, in the bands' order."""
    return {name: sum(lo <= s <= hi for s in scores) for name, (lo, hi) in BANDS.items()}
