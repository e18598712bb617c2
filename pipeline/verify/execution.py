"""Stage 1, execution: model-free rollouts on every level must run cleanly.

On each level: random episodes whose actions include unknown names and out-of-range or
missing parameters, then a planner episode (a short search's witness, then random valid
actions). Any exception, hang (the worker's call limit), CPU overrun, non-finite or
non-numeric reward, a reply of the wrong shape (checked on the host), or an empty observation
rejects. An episode that the environment does not end within `termination.max_steps` is
truncated by the runtime and only warned about (not when done() itself ends it at the cap).

End conditions are checked against the DSL: after each step, every `termination.conditions`
entry the condition grammar parses is evaluated on the true state (with t, max_steps,
remaining_steps and last_action_result); one that becomes true on a step before the cap while
the environment goes on (done() false) rejects, naming the condition and the step. A condition
outside the grammar or naming a path the state lacks cannot be checked: the figures list it.

Last, the fingerprint of the dynamics (dynamics.py) from fixed action sequences: figures.dynamics.
"""
from __future__ import annotations

import random
from collections import Counter

from envforge.dsl_schema.conditions import ConditionError, ConditionSyntaxError, holds, parse_condition
from envforge.pipeline import layout, planner
from envforge.pipeline.errors import Rejected
from envforge.pipeline.evaluate.agents import ActionsAgent, RandomAgent
from envforge.pipeline.evaluate.episode import Turn, run_episode_sync
from envforge.pipeline.kinds import ExecutionFigures
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient, Level
from envforge.pipeline.verify import dynamics
from envforge.pipeline.verify.causes import EmptyObservation, EndConditionIgnored, crashed
from envforge.pipeline.verify.context import Context, failure_text, located
from envforge.pipeline.verify.outcome import StageOutcome, settle

# Levels to roll out on when the folder has none: generated from these seeds.
FALLBACK_SEEDS = (1, 2, 3)


def run(ctx: Context, levels: list | None) -> StageOutcome[ExecutionFigures]:
    """Its figures (also when it rejects) and the first failure as its rejection; `levels` pass
    through (this stage rolls out on the folder's own, or generated ones)."""
    sources = [Level(file=f) for f in ctx.env.all_levels()] or [Level(seed=s) for s in FALLBACK_SEEDS]
    return settle("execution", ExecutionFigures(levels=len(sources)),
                  lambda figures: _roll_out(ctx, sources, figures, levels))


def _roll_out(ctx: Context, sources: list[Level], figures: ExecutionFigures, levels: list | None) -> list | None:
    ends = EndChecks(ctx, figures)
    rng = random.Random(ctx.options.seed)
    failures: Counter = Counter()
    try:
        with ctx.worker() as worker:
            for source in sources:
                for i in range(ctx.options.execution_episodes):
                    _episode(ctx, worker, source, f"random episode {i + 1}", figures, failures,
                             RandomAgent(ctx.space, rng, ctx.options.invalid_rate), seed=i, ends=ends)
                plan = _plan(ctx, worker, source, figures, failures)
                _episode(ctx, worker, source, "planner episode", figures, failures,
                         ActionsAgent(plan, then=RandomAgent(ctx.space, rng)), seed=0, ends=ends)
            figures.dynamics = _dynamics(ctx, worker, sources) or None
    finally:
        figures.failures_by_kind = dict(failures)
    return levels


def _dynamics(ctx: Context, env: EnvClient, sources: list[Level]) -> str:
    """The fingerprint of the dynamics (pipeline/verify/dynamics.py) on the levels rolled out on."""
    try:
        return dynamics.fingerprint(env, ctx.space.candidates(), sources, ctx.max_steps)
    except SandboxFailure as f:
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the fingerprint's fixed action sequences to run "
                       f"without failure, found {failure_text(f)}",
                       cause=crashed(f, layout.ENV_MAIN, "the dynamics fingerprint")) from None


def _plan(ctx: Context, env: EnvClient, source: Level, figures: ExecutionFigures, failures: Counter) -> list[dict]:
    try:
        first = env.reset(source)
        _observation(first.observation, failures, source, "the planner's search")
        result = planner.search(env, ctx.spec, actions=planner.candidates(ctx.space, env),
                                max_nodes=ctx.options.execution_nodes, seconds=ctx.options.search_seconds)
    except SandboxFailure as f:
        failures[f.kind] += 1
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the planner's search on {source} to run "
                       f"without failure, found {failure_text(f)}",
                       cause=crashed(f, layout.ENV_MAIN, "the planner's search", source)) from None
    figures.planner_nodes += result.nodes
    return list(result.witness)


class EndChecks:
    """The DSL's termination.conditions that can be checked on the states an episode passes through."""

    def __init__(self, ctx: Context, figures: ExecutionFigures):
        self.max_steps = ctx.max_steps
        self.conditions, self.unchecked = [], {}
        termination = ctx.config.get("termination") if isinstance(ctx.config, dict) else None
        texts = termination.get("conditions") if isinstance(termination, dict) else None
        for i, text in enumerate(texts if isinstance(texts, list) else []):
            try:
                self.conditions.append((f"termination.conditions[{i}]", text, parse_condition(text)))
            except ConditionSyntaxError as e:
                self.unchecked[str(text)] = f"outside the condition grammar ({e})"
        self.checked = [text for _, text, _ in self.conditions]
        self.warned_never_ends = False  # the warning that done() never became true is given once
        figures.end_conditions = {"checked": self.checked, "unchecked": self.unchecked}

    def holding(self, state, t: int, last_action_result) -> set[str]:
        """The conditions that hold in `state` (a condition the state cannot answer is dropped)."""
        names = {"t": t, "max_steps": self.max_steps, "remaining_steps": self.max_steps - t,
                 "last_action_result": last_action_result}
        out = set()
        for where, text, parsed in list(self.conditions):
            try:
                if holds(parsed, state if isinstance(state, dict) else {}, names):
                    out.add(where)
            except (ConditionError, ConditionSyntaxError) as e:
                self.conditions.remove((where, text, parsed))
                self.unchecked[str(text)] = f"the state cannot answer it ({e})"
                self.checked.remove(text)
        return out

    def text(self, where: str) -> str:
        return next(text for w, text, _ in self.conditions if w == where)


class _Watched:
    """An agent whose every action is noted (the failing one included), and whose first turn checks
    the observation after reset and notes the end conditions holding in the first state."""

    def __init__(self, agent, first_turn):
        self.agent, self.first_turn, self.chosen = agent, first_turn, []

    async def act(self, turn: Turn):
        if turn.step == 1:
            self.first_turn(turn.observation)
        decision = await self.agent.act(turn)
        self.chosen.append(decision.action)
        return decision


def _episode(ctx: Context, env: EnvClient, source: Level, what: str, figures: ExecutionFigures, failures: Counter,
             agent,
             seed: int, ends: EndChecks) -> None:
    held: list[set[str]] = []  # the end conditions holding before the step to come

    def first_turn(observation):
        _observation(observation, failures, source, what)
        if ends.conditions:
            held.append(ends.holding(env.observe(want_state=True).state, 0, None))

    watched = _Watched(agent, first_turn)
    chosen = watched.chosen

    def on_step(action, result):
        _observation(result.observation, failures, source, what, len(chosen), action)
        if not held:
            return
        step = len(chosen)
        now = ends.holding(result.state, result.t if isinstance(result.t, int) else step, result.last_action_result)
        became = sorted(now - held[-1])
        held.append(now)
        if became and not result.terminated and step < ctx.max_steps:
            where = became[0]
            raise Rejected(f"{layout.ENV_MAIN}: expected the episode to end when {layout.CONFIG} {where} "
                           f"({ends.text(where)!r}) holds, found done() false and the episode going on after step "
                           f"{step} ({_fmt(action)}) of a {what} on {source}, where it holds",
                           cause=EndConditionIgnored(where, str(ends.text(where)), step, _fmt(action), str(source),
                                                     what))

    try:
        episode = run_episode_sync(watched, env, source, seed=seed, on_step=on_step,
                                   want_state=bool(ends.conditions))
    except SandboxFailure as f:
        failures[f.kind] += 1
        # An action chosen means the reset went through: the failure came with that step.
        during = f" on step {len(chosen)}, {_fmt(chosen[-1])}" if chosen else f" during '{f.op}'"
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected a {what} on {source} to run without failure, "
                       f"found {failure_text(f)}{during}",
                       cause=crashed(f, layout.ENV_MAIN, what, source, len(chosen) if chosen else None,
                                     _fmt(chosen[-1]) if chosen else None)) from None
    figures.episodes += 1
    figures.steps += episode.steps
    if episode.truncated:
        figures.truncated_episodes += 1
    if episode.truncated and not episode.ended_at_cap and not ends.warned_never_ends:
        ends.warned_never_ends = True
        figures.warnings = (figures.warnings or []) + [
            f"{layout.ENV_MAIN}: expected done() to become true by termination.max_steps={ctx.max_steps}, found "
            f"still running after {ctx.max_steps} steps of a {what} on {source} (the runtime truncated it)"]


def _observation(observation, failures: Counter, source: Level, what: str, step: int = 0,
                 action: dict | None = None) -> None:
    """Reject an observation that is None or blank, after reset (`step` 0) or after step `step` of a
    `what` (the reason and the cause are made only then: this runs on every step)."""
    if observation is not None and not (isinstance(observation, str) and not observation.strip()):
        return
    failures["empty_observation"] += 1
    at = f"after reset on {source}" if action is None else f"after step {step} ({_fmt(action)}) of a {what} on {source}"
    raise Rejected(f"{layout.ENV_MAIN}: expected a non-empty observation {at}, found {observation!r}",
                   cause=EmptyObservation(str(source), step, what, None if action is None else _fmt(action)))


def _fmt(action: dict) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in (action.get("params") or {}).items())
    return f"{action.get('action')}({params})"
