"""Run many episodes at once: (env, level, run) for every environment, level and run, skipping
the ones the output folder already holds.

Episodes are asyncio tasks, at most `concurrency` at a time. Each leases a sandbox worker
from a pool (reused across episodes of the same environment) and makes every worker call on a
thread pool of its own, so model calls of all episodes overlap and a slow environment holds up
only its own episode. A budget cap ends what it covers: a theme cap the episodes of that
environment, the run cap every episode not yet started.
"""
from __future__ import annotations

import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Awaitable, Callable

from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.evaluate.context import EpisodeContext, WorkerSession
from envforge.pipeline.evaluate.episode import INFRASTRUCTURE, RERUN_ON_RESUME, Limits, Tracker
from envforge.pipeline.evaluate.records import Records, Trajectory, content_hash, level_hash
from envforge.pipeline.evaluate.report import average
from envforge.pipeline.kinds import EpisodeEnd, EpisodeRecord, EpisodeStart, TrajectoryLine
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits, WorkerPool
from envforge.pipeline.sandbox.outside.capabilities import ran_as, ran_under
from envforge.pipeline.sandbox.outside.client import EnvClient
from envforge.pipeline.sandbox.outside.executor import INFRASTRUCTURE_RETRIES, infrastructure_errors
from envforge.pipeline.terminal import in_notebook, shown, unfiltered

# player(ctx, tracker, log) plays one episode; the tracker holds the outcome.
Player = Callable[[EpisodeContext, Tracker, Callable[[TrajectoryLine], None]], Awaitable[Tracker]]


@dataclass(frozen=True)
class RunOptions:
    agent: str
    model: str
    runs: int = 3
    split: str = "test"
    max_levels: int | None = None
    concurrency: int = 4
    limits: Limits = Limits()
    sandbox: SandboxLimits = SandboxLimits(call_seconds=10.0, cpu_seconds=1800)
    skin: str | None = None  # render every environment through its skins/<skin>.py
    run_seconds: float = 12 * 3600.0  # wall clock of the whole run; past it no episode starts (0: off)
    agent_settings: dict = field(default_factory=dict)  # the agent's options that change its play

    def settings(self) -> dict:
        """What, besides the environment and level, determines an episode's outcome (kept in its record)."""
        return {"limits": asdict(self.limits), "call_seconds": self.sandbox.call_seconds, "skin": self.skin,
                **self.agent_settings}


@dataclass(frozen=True)
class EpisodeSpec:
    env: EnvSpec
    level: Level
    run: int
    determined_by: dict = field(default_factory=dict, compare=False)  # what its record must match (PROVENANCE)


@dataclass
class RunOutcome:
    planned: int = 0
    skipped: int = 0  # already in the output folder
    not_started: int = 0  # left out after a budget cap
    finished: list[EpisodeRecord] = field(default_factory=list)
    budget_message: str = ""
    rerun: dict[str, int] = field(default_factory=dict)  # why recorded episodes ran again -> how many


def plan(targets: list[EnvSpec], options: RunOptions) -> list[EpisodeSpec]:
    """Run-major order: an interrupted evaluation leaves whole runs behind, not whole levels."""
    return [EpisodeSpec(t, level, run) for run in range(options.runs) for t in targets
            for level in t.levels(options.split, options.max_levels)]


async def evaluate(targets: list[EnvSpec], player: Player, options: RunOptions, records: Records,
                   progress=None, pool: WorkerPool | None = None) -> RunOutcome:
    """Play every planned episode not yet in `records`. `pool`: sandbox workers to reuse (a caller
    that evaluates again and again, e.g. learning, keeps its workers warm; it closes the pool
    itself); by default a pool of `concurrency` workers lives as long as this call."""
    specs = plan(targets, options)
    outcome = RunOutcome(planned=len(specs))
    pending = []
    env_hashes = {t.name: content_hash(t.dir.path) for t in targets}
    for spec in specs:
        spec.determined_by.update(
            env_hash=env_hashes[spec.env.name],
            level_hash=level_hash(spec.env.dir.path, spec.level),
            max_reward=spec.env.max_reward(spec.level),
            difficulty=(profile := spec.env.difficulty(spec.level)) and profile.score,
            difficulty_band=profile and profile.band,
            split=options.split,
            settings=options.settings(),
        )
        reuse, why = records.reuse((spec.env.name, str(spec.level), spec.run, options.agent, options.model),
                                   spec.determined_by, RERUN_ON_RESUME)
        if reuse:
            outcome.skipped += 1
            continue
        pending.append(spec)
        if why:
            outcome.rerun[why] = outcome.rerun.get(why, 0) + 1
    if progress is not None:
        progress.start(len(pending), outcome.planned, outcome.skipped)
    slots = asyncio.Semaphore(max(1, options.concurrency))
    stopped_envs: set[str] = set()
    stop_all = asyncio.Event()
    executor = ThreadPoolExecutor(max_workers=options.concurrency + 4, thread_name_prefix="envforge-evaluate")
    own_pool = pool is None
    pool = pool or WorkerPool(size=options.concurrency, limits=options.sandbox, skin=options.skin)

    deadline = time.monotonic() + options.run_seconds

    async def one(spec: EpisodeSpec) -> None:
        async with slots:
            if 0 < options.run_seconds and time.monotonic() > deadline:
                outcome.budget_message = f"run: wall clock of {options.run_seconds:g}s reached (wall_clock)"
                stop_all.set()
            if stop_all.is_set() or spec.env.name in stopped_envs:
                outcome.not_started += 1
                return
            lost: list[str] = []  # a node lost with the episode's worker: played again elsewhere
            while True:
                try:
                    record, budget_scope = await _episode(spec, player, options, records, pool, executor)
                    break
                except infrastructure_errors() as exc:
                    lost.append(str(exc))
                    if len(lost) > INFRASTRUCTURE_RETRIES:
                        raise
            record.executor_retries = lost
        records.add(record)
        outcome.finished.append(record)
        if progress is not None:
            progress.update(record)
        if record.stop_reason == "budget":
            outcome.budget_message = record.stop_detail
            (stop_all.set() if budget_scope == "run" else stopped_envs.add(spec.env.name))

    try:
        await asyncio.gather(*(one(spec) for spec in pending))
    finally:
        if own_pool:
            await asyncio.get_running_loop().run_in_executor(executor, pool.close)
        executor.shutdown(wait=False)
        if progress is not None:
            progress.close()
    return outcome


async def _episode(spec: EpisodeSpec, player: Player, options: RunOptions, records: Records, pool: WorkerPool,
                   executor: ThreadPoolExecutor) -> tuple[EpisodeRecord, str]:
    """The episode's record, and the scope of the budget cap that stopped it ("" when none did)."""
    loop = asyncio.get_running_loop()
    identity = dict(env=spec.env.name, level=str(spec.level), run=spec.run, agent=options.agent, model=options.model)
    max_reward = spec.env.max_reward(spec.level)
    env_steps = spec.env.max_steps  # config.yaml's termination.max_steps, never the worker's word
    turns = min(options.limits.max_steps, env_steps) if options.limits.max_steps else env_steps
    tracker = Tracker(options.limits, turns, max_reward, spec.env.actions, max_note=spec.env.max_note(spec.level))
    path = records.trajectory_path(spec.env.name, options.agent, options.model, spec.level, spec.run)
    trajectory = Trajectory(path)
    trajectory.write(EpisodeStart(**identity, split=options.split, max_reward=max_reward,
                                  env_dir=str(spec.env.dir.path), limits=vars(options.limits)))
    lease = pool.lease(spec.env.dir.path)
    confinement, ran = ran_under(), ran_as()
    try:
        worker = await loop.run_in_executor(executor, lease.__enter__)
    except SandboxFailure as f:
        tracker.stop("env_error", f"the environment did not load: {f}")
    else:
        confinement, ran = worker.confinement, worker.runs_as
        try:
            # The episode's length is the runtime's: config.yaml's cap, or less if asked.
            ctx = EpisodeContext(spec.env, spec.level, spec.run, turns, max_reward,
                                 WorkerSession(EnvClient(worker, turns), executor))
            await player(ctx, tracker, trajectory.write)
        except SandboxFailure as f:  # e.g. the planner's search failed in the worker
            tracker.stop("env_error", str(f))
        finally:
            await loop.run_in_executor(executor, lease.__exit__, None, None, None)
    determined = {k: v for k, v in spec.determined_by.items() if k not in ("split", "max_reward")}
    record = tracker.record(**identity, split=options.split, trajectory=str(path.relative_to(records.out)),
                            tags=spec.env.tags, **determined)
    record.confinement, record.runs_as = confinement, ran
    trajectory.write(EpisodeEnd(record))
    trajectory.close()
    return record, tracker.budget_scope


class Progress:
    """Progress on stderr: the plan before the first episode starts, then episodes done, mean
    normalized score so far and dollars spent. On a terminal or in a notebook cell a redrawn bar;
    elsewhere (a log, CI) plain lines: one per twentieth of the run, and one at least every `every_seconds`
    while episodes finish. `mode`: "bar", "lines" or "off" (default: bar on a terminal, else lines)."""

    def __init__(self, label: str, mode: str | None = None, every_seconds: float = 60.0):
        self.label = label
        self.mode = mode or ("bar" if sys.stderr.isatty() or in_notebook(sys.stderr) else "lines")
        self.every_seconds = every_seconds
        self.scores: list[float] = []
        self.dollars = 0.0
        self.done = 0
        self.total = 0
        self.bar = None
        self.last_line = 0.0

    def start(self, total: int, planned: int | None = None, skipped: int = 0) -> None:
        self.total = total
        if self.mode == "off":
            return
        planned = total + skipped if planned is None else planned
        print(f"evaluate: {self.label}: {planned} episode(s) planned, {skipped} already done, {total} to run now",
              file=sys.stderr, flush=True)
        self.last_line = time.monotonic()
        if self.mode == "bar" and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=shown(self.label), unit="ep", file=unfiltered(sys.stderr),
                            dynamic_ncols=True)

    def update(self, record: EpisodeRecord) -> None:
        self.done += 1
        self.dollars += record.dollars
        if record.normalized is not None and record.stop_reason not in INFRASTRUCTURE:
            self.scores.append(record.normalized)
        if self.bar is not None:
            self.bar.set_postfix_str(self.postfix(), refresh=False)
            self.bar.update(1)
        elif self.mode == "lines":
            step = max(1, -(-self.total // 20))
            now = time.monotonic()
            if self.done == self.total or self.done % step == 0 or now - self.last_line >= self.every_seconds:
                self.last_line = now
                print(f"evaluate: {self.label}: {self.done}/{self.total} episode(s) done, {self.postfix()}",
                      file=sys.stderr, flush=True)

    def postfix(self) -> str:
        mean = f"{average(self.scores):.3f}" if self.scores else "-"
        return f"mean {mean} | ${self.dollars:.4f}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
