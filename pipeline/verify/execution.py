"""Stage 1, execution: model-free rollouts on every level must run cleanly.

On each level: random episodes whose actions include unknown names and out-of-range or
missing parameters, then a planner episode (a short search's witness, then random valid
actions). Any exception, hang (the worker's call limit), CPU overrun, non-finite or
non-numeric reward, a reply of the wrong shape (checked on the host), or an empty observation
rejects. An episode that the environment does not end within `termination.max_steps` is
truncated by the runtime and only warned about.
"""
from __future__ import annotations

import random
from collections import Counter

from pipeline import layout, planner
from pipeline.rollout import run_episode
from pipeline.sandbox import SandboxFailure
from pipeline.errors import Rejected
from pipeline.sandbox.client import EnvClient, Level
from pipeline.verify.context import Clock, Context, failure_text, located

# Levels to roll out on when the folder has none: generated from these seeds.
FALLBACK_SEEDS = (1, 2, 3)


def run(ctx: Context, figures: dict) -> None:
    """Fills `figures` (also when it rejects) and raises Rejected on the first failure."""
    clock = Clock()
    sources = [Level(file=f) for f in ctx.env.all_levels()] or [Level(seed=s) for s in FALLBACK_SEEDS]
    figures.update({"levels": len(sources), "episodes": 0, "steps": 0, "planner_nodes": 0,
                    "truncated_episodes": 0, "failures_by_kind": {}})
    rng = random.Random(ctx.options.seed)
    failures: Counter = Counter()
    try:
        with ctx.worker() as worker:
            for source in sources:
                for i in range(ctx.options.execution_episodes):
                    _episode(ctx, worker, source, f"random episode {i + 1}", figures, failures,
                             lambda obs, last: ctx.space.sample(rng, ctx.options.invalid_rate), seed=i)
                plan = _plan(ctx, worker, source, figures, failures)
                _episode(ctx, worker, source, "planner episode", figures, failures,
                         lambda obs, last: plan.pop(0) if plan else ctx.space.sample(rng), seed=0)
    finally:
        figures["failures_by_kind"] = dict(failures)
        figures.update(clock.figures())


def _plan(ctx: Context, env: EnvClient, source: Level, figures: dict, failures: Counter) -> list[dict]:
    try:
        first = env.reset(source)
        _observation(first.observation, f"after reset on {source}", failures)
        result = env.search(planner.candidates(ctx.space, env), max_nodes=ctx.options.execution_nodes, seconds=ctx.options.search_seconds)
    except SandboxFailure as f:
        failures[f.kind] += 1
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the planner's search on {source} to run "
                       f"without failure, found {failure_text(f)}") from None
    figures["planner_nodes"] += result.nodes
    return list(result.witness)


def _episode(ctx: Context, env: EnvClient, source: Level, what: str, figures: dict, failures: Counter, policy,
             seed: int) -> None:
    chosen: list[dict] = []  # every action sent, the failing one included

    def choose(observation, last):
        if last is None:
            _observation(observation, f"after reset on {source}", failures)
        chosen.append(policy(observation, last))
        return chosen[-1]

    def on_step(action, result):
        _observation(result.observation, f"after step {len(chosen)} ({_fmt(action)}) of a {what} on {source}",
                     failures)

    try:
        episode = run_episode(env, choose, source, seed=seed, on_step=on_step)
    except SandboxFailure as f:
        failures[f.kind] += 1
        # An action chosen means the reset went through: the failure came with that step.
        during = f" on step {len(chosen)}, {_fmt(chosen[-1])}" if chosen else f" during '{f.op}'"
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected a {what} on {source} to run without failure, "
                       f"found {failure_text(f)}{during}") from None
    figures["episodes"] += 1
    figures["steps"] += episode.steps
    if episode.truncated:
        figures["truncated_episodes"] += 1
        warnings = figures.setdefault("warnings", [])
        if not warnings:
            warnings.append(f"{layout.ENV_MAIN}: expected done() to become true by termination.max_steps="
                            f"{ctx.max_steps}, found still running after {ctx.max_steps} steps of a {what} on "
                            f"{source} (the runtime truncated it)")


def _observation(observation, what: str, failures: Counter) -> None:
    if observation is None or (isinstance(observation, str) and not observation.strip()):
        failures["empty_observation"] += 1
        raise Rejected(f"{layout.ENV_MAIN}: expected a non-empty observation {what}, found {observation!r}")


def _fmt(action: dict) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in (action.get("params") or {}).items())
    return f"{action.get('action')}({params})"
