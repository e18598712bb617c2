"""What every verification stage shares: the folder, its actions, budgets and a worker per stage.

A level is named by a *source*: a level file relative to the folder ("levels/level_01.yaml")
or a generator seed ("seed:7", made in the worker and never written to the folder).
"""
from __future__ import annotations

import contextlib
import os
import resource
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator

from envforge.pipeline import layout
from envforge.pipeline.difficulty import PROFILE_NODES
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import InfrastructureError, LocatedError, Rejected
from envforge.pipeline.kinds import EnvDoesNotLoad, StageFigures, UnreadableFolder
from envforge.pipeline.levelmax import SEARCH_NODES, SEARCH_SECONDS, Search, no_op
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient
from envforge.pipeline.verify.claims import read_claims


@dataclass
class VerifyRunOptions:
    margin: float = 0.2  # reliability: reject when random_mean >= planner_mean - margin
    test_levels: int = 10  # generated levels for levels/
    val_levels: int = 5  # ... and for val_levels/
    max_seeds: int = 45  # generator attempts before the levels stage gives up
    first_seed: int = 1  # the first seed given to the generator (`envforge levels` draws batches from others)
    # Search budget per level (all its passes), in environment steps: the same on an idle and a busy machine.
    search_nodes: int = SEARCH_NODES
    # Wall-clock safety stop per search, not a budget: a level it cuts is labelled (its figures
    # would depend on machine load).
    search_seconds: float = SEARCH_SECONDS
    execution_episodes: int = 2  # random episodes per level in the execution stage
    execution_nodes: int = 2_000  # planner search per level in the execution stage
    invalid_rate: float = 0.25  # share of malformed actions in execution rollouts
    random_episodes: int = 5  # random-agent episodes per level in the reliability stage
    profile_nodes: int = PROFILE_NODES  # breadth-first nodes per level for its difficulty profile
    write_levels: bool = False  # write the generated level set into the folder
    write: bool = False  # write verification.json, manifest.json and level_max_rewards.json into the folder
    # Workers at once (searches in the levels stage, levels in the reliability stage): every core.
    workers: int = field(default_factory=lambda: cores())
    seed: int = 0
    # Wall clock of the model-free stages: an env answering every call just inside its limit
    # would otherwise stretch them for hours. A safety stop, never a verdict: past it each stage's
    # next call fails (wall_clock) and verification ends with BudgetRanOut, judging nothing.
    # None or 0: no deadline (learn's level making, the probes: they have no --budget to name).
    budget_seconds: float | None = 3600.0
    # Each call has its wall-clock limit (searches: their own budget plus a margin); the CPU
    # limit only stops a runaway worker and must not cut a stage's searches short.
    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(call_seconds=10.0, cpu_seconds=3600))
    # Told what verification is doing as it goes (a line each: "levels: started", a level certified:
    # its max against its bound, nodes per second, the budget left); the command prints it, generate
    # prefixes the theme. Not part of what verification decides.
    progress: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    def recorded(self) -> dict:
        """What verification.json keeps of the options it ran with: every setting but `progress`."""
        return {f.name: (getattr(self, f.name).to_dict() if f.name == "limits" else getattr(self, f.name))
                for f in fields(self) if f.name != "progress"}

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)


class BudgetRanOut(InfrastructureError):
    """Verification's wall-clock budget (`VerifyRunOptions.budget_seconds`, --budget) ran out before it could
    judge: a safety stop that cut a stage, not a verdict on the environment (where it cuts depends on
    machine load). Nothing is recorded; the message says which limit cut which stage."""

    def __init__(self, budget: float, stage: str, elapsed: float):
        super().__init__(
            f"verify's wall-clock budget of {budget:g}s (--budget) ran out during the {stage} stage, after "
            f"{elapsed:.0f}s: a safety stop, not a verdict on the environment (where it cuts depends on machine "
            f"load); nothing was judged or recorded: run it again with a larger --budget or on a less loaded machine")
        self.budget, self.stage = budget, stage


@dataclass
class Context:
    spec: EnvSpec
    options: VerifyRunOptions
    claims: dict = field(default_factory=dict)  # the shipped level_max_rewards.json, read before any write
    deadline: tuple[float, str] | None = None  # (time.monotonic() value, what set it): see EnvClient

    def over_budget(self) -> bool:
        """Whether the wall-clock budget has run out (every call of a worker is refused past it)."""
        return self.deadline is not None and time.monotonic() > self.deadline[0]

    @property
    def env(self) -> layout.EnvDir:
        return self.spec.dir

    @property
    def config(self) -> dict:
        return self.spec.config

    @classmethod
    def open(cls, env_dir, options: VerifyRunOptions) -> "Context":
        try:
            spec = EnvSpec.open(env_dir, full_paths=False).playable()
        except LocatedError as e:
            p = e.problem
            raise Rejected(str(e), cause=UnreadableFolder(p.file, p.expected, p.found, p.path, p.line)) from None
        budget = options.budget_seconds
        deadline = (time.monotonic() + budget, f"verify's budget of {budget:g}s ran out (--budget)") if budget else None
        return cls(spec, options, read_claims(spec), deadline)

    @property
    def space(self):
        return self.spec.actions

    @property
    def search(self) -> Search:
        """What certifying a level takes here: the search budget per level and the shipped claims."""
        return Search(self.spec, self.options.search_nodes, self.options.search_seconds, self.claims)

    @property
    def max_steps(self) -> int:
        return self.spec.max_steps

    @property
    def no_op(self) -> dict | None:
        return no_op(self.spec)

    @contextlib.contextmanager
    def worker(self) -> Iterator[EnvClient]:
        """A fresh worker for one stage, closed (and so reaped, for CPU accounting) after it."""
        try:
            env = EnvClient.start(self.spec, self.options.limits,  # here, or on a Ray node
                                  deadline=self.deadline)
        except SandboxFailure as f:
            raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected env_main.py to import and its SkinEnv "
                           f"subclass to instantiate, found {f.kind}: {f.detail}",
                           cause=EnvDoesNotLoad(f.kind, located(f, layout.ENV_MAIN), str(f.detail)[:500])) from None
        try:
            yield env
        finally:
            env.close()


def cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container may narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def located(failure: SandboxFailure, default: str) -> str:
    """Where a failure happened: the env's file:line when known, else the file at fault."""
    return failure.where or default


def failure_text(failure: SandboxFailure) -> str:
    text = f"{failure.kind}: {failure.detail}"
    if failure.output.strip() and failure.kind in ("exception", "exit", "crash"):
        text += f" (output: {failure.output.strip()[-200:]!r})"
    return text


class Clock:
    """Wall and CPU seconds of a stage: this process plus the workers it reaped."""

    def __init__(self):
        self.wall, self.cpu = time.monotonic(), _cpu()

    def wall_seconds(self) -> float:
        return round(time.monotonic() - self.wall, 3)

    def stamp(self, figures: StageFigures) -> StageFigures:
        """`figures` with the wall and CPU seconds since this clock started."""
        figures.wall_seconds, figures.cpu_seconds = self.wall_seconds(), round(_cpu() - self.cpu, 3)
        return figures


def _cpu() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total
