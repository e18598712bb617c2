"""What agents are given: the environment as data (read in the parent, never run) and the episode."""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable

from pipeline import layout
from pipeline.envfolder.actions import ActionSpace
from pipeline.envfolder.spec import DEFAULT_MAX_STEPS, EnvSpec
from pipeline.sandbox.outside.client import EnvClient, Observation, StepResult


@dataclass
class EnvTarget:
    """An environment folder to evaluate on, with what its agents read."""

    dir: layout.EnvDir
    config: dict
    instruction: str  # agent_instruction.txt, else the DSL's meta.description
    action_space: str  # action_space.txt, else derived from the DSL
    space: ActionSpace  # the one action space (declared, and untyped domains from evidence)
    tools: list[dict]  # one native tool schema per action
    tags: dict[str, str]
    max_rewards: dict[str, float]
    max_steps: int = DEFAULT_MAX_STEPS  # config.yaml's termination.max_steps, never the env code's
    spec: EnvSpec | None = None

    @property
    def name(self) -> str:
        return self.dir.name

    @classmethod
    def load(cls, env: layout.EnvDir) -> "EnvTarget":
        """The folder read once by EnvSpec; a bad file is a LocatedError (exit 2 at the CLI)."""
        spec = EnvSpec.open(env.path)
        config = spec.config
        space = spec.actions
        return cls(spec.dir, config, spec.instruction, space.text(), space, space.tools(), spec.tags,
                   spec.max_rewards, spec.max_steps, spec)

    def levels(self, split: str, limit: int | None) -> list[str]:
        levels = self.spec.level_list(split) if self.spec else self.dir.levels(split)
        return levels[:limit] if limit else levels

    def max_reward(self, level: str) -> float | None:
        """The max reward a normalized score on `level` divides by: None when there is none or when it
        must not divide (EnvSpec.scoring_max: unknown, or a claim found wrong)."""
        return self.scoring_max(level)[0]

    def max_note(self, level: str) -> str:
        """What a normalized score on `level` must say about its max reward ("" when certified)."""
        return self.scoring_max(level)[1]

    def scoring_max(self, level: str) -> tuple[float | None, str]:
        """The folder's rule (EnvSpec.scoring_max) for a level it knows; for a level it does not (learn's
        training levels, certified when they were made), the max given with the target."""
        if self.spec is not None:
            value, note = self.spec.scoring_max(level)
            if value is not None or note:
                return value, note
        return self.max_rewards.get(layout.level_key(level)), ""


@dataclass
class WorkerSession:
    """A leased sandbox worker seen from async code. Worker calls block, so each runs on the
    evaluation's own thread pool: a slow environment holds one thread, never the event loop."""

    env: EnvClient
    executor: Executor

    async def blocking(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    async def reset(self, level: str) -> Observation:
        """`level`: a level file of the folder, or "seed:N", the level the env's generator makes
        from seed N (envforge learn trains on such levels); see Level."""
        return await self.blocking(self.env.reset, level)

    async def step(self, action: dict) -> StepResult:
        return await self.blocking(self.env.step, action)


@dataclass
class EpisodeContext:
    env: EnvTarget
    level: str
    run: int
    max_steps: int  # turns this episode may take
    max_reward: float | None
    session: WorkerSession
