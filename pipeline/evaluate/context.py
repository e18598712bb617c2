"""What agents are given: the environment as data (read in the parent, never run) and the episode."""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable

from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.sandbox.outside.client import EnvClient, Observation, StepResult


@dataclass
class WorkerSession:
    """A leased sandbox worker seen from async code. Worker calls block, so each runs on the
    evaluation's own thread pool: a slow environment holds one thread, never the event loop."""

    env: EnvClient
    executor: Executor

    async def blocking(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    async def reset(self, level: Level) -> Observation:
        """`level`: a level file of the folder, or "seed:N", the level the env's generator makes
        from seed N (envforge learn trains on such levels); see Level."""
        return await self.blocking(self.env.reset, level)

    async def step(self, action: dict) -> StepResult:
        return await self.blocking(self.env.step, action)


@dataclass
class EpisodeContext:
    env: EnvSpec  # the environment, read once on the host (its instruction, actions, tools, config)
    level: Level
    run: int
    max_steps: int  # turns this episode may take
    max_reward: float | None
    session: WorkerSession
