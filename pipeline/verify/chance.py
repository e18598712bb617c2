"""Stochastic environments: randomness drawn during `step`, and what it does to a level's verdicts.

Search plays each level from one seed of the random numbers (the worker seeds them at reset), so
for an environment whose transitions draw random numbers, "no action sequence scores" holds for
that one chance outcome only, and the best total found is one lucky or unlucky draw. `probe`
finds out whether steps draw random numbers (the global RNGs' state, or a generator the env
holds, changes across a step). For such an environment the levels stage (levels.py) never calls
a level unsolvable on search alone (its max is "unknown" instead), and the max reward of a
level file is an *expectation estimate*: the mean total of the search's witness replayed under
ESTIMATE_SEEDS other seeds, with its 95 % confidence interval, labelled so.
"""
from __future__ import annotations

import math
import random
import statistics

from envforge.pipeline.planner import replay
from envforge.pipeline.sandbox.outside.client import EnvClient, Level

PROBE_LEVELS = 3  # levels probed for randomness drawn during step
PROBE_STEPS = 10  # random valid actions per probed level
ESTIMATE_SEEDS = 10  # replays of a witness under other seeds, for a stochastic level's expected max


def probe(ctx, worker: EnvClient, levels: list[Level]) -> dict | None:
    """Where a step first drew random numbers ({level, step, action}), or None when none did."""
    rng = random.Random(ctx.options.seed + 11)
    for level in levels[:PROBE_LEVELS]:
        worker.reset(level)
        for step in range(1, PROBE_STEPS + 1):
            action = ctx.space.sample(rng)
            out = worker.step(action, check_rng=True)
            if out.rng_drawn:
                return {"level": str(level), "step": step, "action": action}
            if out.done:
                break
    return None


def estimate(worker: EnvClient, level: str, witness: list[dict], seeds: int = ESTIMATE_SEEDS) -> dict:
    """The witness's total replayed from `seeds` seeds of the level: mean, 95 % half-width, range."""
    totals = []
    for seed in range(1, seeds + 1):
        worker.reset(level, seed=seed)
        totals.append(replay(worker, witness)[0])
    mean = statistics.fmean(totals)
    half = 1.96 * statistics.stdev(totals) / math.sqrt(len(totals)) if len(totals) > 1 else 0.0
    return {"mean": round(mean, 9), "ci95": [round(mean - half, 9), round(mean + half, 9)], "seeds": len(totals),
            "min": round(min(totals), 9), "max": round(max(totals), 9)}


def where(found: dict) -> str:
    action = found["action"]
    params = ", ".join(f"{k}={v!r}" for k, v in (action.get("params") or {}).items())
    return f"step {found['step']} ({action.get('action')}({params})) on {found['level']}"
