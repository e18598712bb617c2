"""What agents are given: the environment as data (read in the parent, never run) and the episode."""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable

import yaml

from dsl_schema.actions import Action, action_space_text, tool_schemas
from pipeline import layout
from pipeline.actions import declared_actions
from pipeline.errors import UserError
from pipeline.sandbox import Worker


@dataclass
class EnvTarget:
    """An environment folder to evaluate on, with what its agents read."""

    dir: layout.EnvDir
    config: dict
    instruction: str  # agent_instruction.txt, else the DSL's meta.description
    action_space: str  # action_space.txt, else derived from the DSL
    space: list[Action]  # the declared actions (typed parameters)
    tools: list[dict]  # one native tool schema per action
    tags: dict[str, str]
    max_rewards: dict[str, float]

    @property
    def name(self) -> str:
        return self.dir.name

    @classmethod
    def load(cls, env: layout.EnvDir) -> "EnvTarget":
        try:
            config = yaml.safe_load(env.file(layout.CONFIG).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise UserError(f"{env.file(layout.CONFIG)}: expected valid YAML, found {str(e).splitlines()[0]}") from None
        if not isinstance(config, dict):
            raise UserError(f"{env.file(layout.CONFIG)}: expected a mapping, found {type(config).__name__}")
        instruction = _text(env, layout.AGENT_INSTRUCTION) or str((config.get("meta") or {}).get("description") or "")
        return cls(env, config, instruction.strip(), (_text(env, layout.ACTION_SPACE) or action_space_text(config)).strip(),
                   declared_actions(config), tool_schemas(config), env.tags(), env.max_rewards())

    def levels(self, split: str, limit: int | None) -> list[str]:
        levels = self.dir.levels(split)
        return levels[:limit] if limit else levels

    def max_reward(self, level: str) -> float | None:
        return self.max_rewards.get(layout.level_key(level))


def _text(env: layout.EnvDir, name: str) -> str:
    path = env.file(name)
    return path.read_text(encoding="utf-8") if path.is_file() else ""


@dataclass
class WorkerSession:
    """A leased sandbox worker seen from async code. Worker calls block, so each runs on the
    evaluation's own thread pool: a slow environment holds one thread, never the event loop."""

    worker: Worker
    executor: Executor

    async def blocking(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    async def reset(self, level: str) -> dict:
        """`level`: a level file of the folder, or "seed:N", the level the env's generator makes
        from seed N (verify's convention; envforge learn trains on such levels)."""
        if level.startswith("seed:"):
            return await self.blocking(self.worker.call, "reset", generate=True, seed=int(level[5:]))
        return await self.blocking(self.worker.call, "reset", level=level)

    async def step(self, action: dict) -> dict:
        return await self.blocking(self.worker.call, "step", action=action)


@dataclass
class EpisodeContext:
    env: EnvTarget
    level: str
    run: int
    max_steps: int  # turns this episode may take
    max_reward: float | None
    session: WorkerSession
