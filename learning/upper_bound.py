"""The Learning Upper Bound (AutoEnv §4.2, §5.3) and the figures of Figure 3, from a table of
test scores: `scores[method][env]` (None where a method has no score on an environment).

    per_env(scores, methods)          each environment's best score among `methods`
    upper_bound(scores, methods)      its mean over environments: UpperBound(best), (pareto), (all)
    averages(scores, envs)            each method's mean over the environments (None if one is missing)
    top_k_gain(scores, base, envs)    Figure 3 left: each method's gains over the baseline, largest
                                      first, and the mean of the top k for k = 1 .. E
    bound_by_m(scores, envs)          the upper bound with M methods: the mean, over every subset
                                      of M methods, of that subset's upper bound, for M = 1 .. |methods|
    incremental_top_k(scores, envs)   Figure 3 right: per environment, the M-method bound (mean over
                                      subsets) minus the 1-method one; mean of the top k
"""
from __future__ import annotations

import statistics
from itertools import combinations
from typing import Iterable

Scores = dict[str, dict[str, float | None]]


def per_env(scores: Scores, methods: Iterable[str]) -> dict[str, float | None]:
    methods = list(methods)
    envs = sorted({e for m in methods for e in scores.get(m, {})})
    out = {}
    for env in envs:
        values = [scores[m][env] for m in methods if scores.get(m, {}).get(env) is not None]
        out[env] = max(values) if values else None
    return out


def upper_bound(scores: Scores, methods: Iterable[str]) -> float | None:
    values = [v for v in per_env(scores, methods).values() if v is not None]
    return statistics.fmean(values) if values else None


def averages(scores: Scores, envs: list[str]) -> dict[str, float | None]:
    out = {}
    for method, row in scores.items():
        values = [row.get(e) for e in envs]
        out[method] = statistics.fmean(values) if values and None not in values else None
    return out


def best_single(scores: Scores, envs: list[str]) -> tuple[str | None, float | None]:
    """The method with the highest mean (the first of equals, in the table's order)."""
    means = [(m, a) for m, a in averages(scores, envs).items() if a is not None]
    return max(means, key=lambda ma: ma[1]) if means else (None, None)


def complete(scores: Scores, envs: list[str]) -> list[str]:
    """The environments on which every method has a score (the figures need them all)."""
    return [e for e in envs if all(row.get(e) is not None for row in scores.values())]


def _top_k_means(gains: list[float]) -> list[float]:
    ordered = sorted(gains, reverse=True)
    return [statistics.fmean(ordered[:k]) for k in range(1, len(ordered) + 1)]


def top_k_gain(scores: Scores, baseline: dict[str, float | None], envs: list[str]) -> dict[str, list[float]]:
    """method (and "upper bound") -> mean gain over the baseline of its k best environments."""
    envs = [e for e in complete(scores, envs) if baseline.get(e) is not None]
    series = {m: _top_k_means([scores[m][e] - baseline[e] for e in envs]) for m in scores}
    if envs:
        best = per_env(scores, scores)
        series["upper bound"] = _top_k_means([best[e] - baseline[e] for e in envs])
    return series


def _subset_bound(scores: Scores, env: str, size: int) -> float:
    """Mean over every subset of `size` methods of the best score among them on `env`."""
    return statistics.fmean(max(scores[m][env] for m in subset) for subset in combinations(scores, size))


def bound_by_m(scores: Scores, envs: list[str]) -> dict[int, float]:
    envs = complete(scores, envs)
    if not envs:
        return {}
    return {size: statistics.fmean(_subset_bound(scores, e, size) for e in envs) for size in range(1, len(scores) + 1)}


def incremental_top_k(scores: Scores, envs: list[str]) -> dict[int, list[float]]:
    envs = complete(scores, envs)
    if not envs:
        return {}
    single = {e: _subset_bound(scores, e, 1) for e in envs}
    return {size: _top_k_means([_subset_bound(scores, e, size) - single[e] for e in envs])
            for size in range(1, len(scores) + 1)}
