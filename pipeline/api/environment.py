"""An environment folder from Python: read it as data, and play it step by step in the sandbox.

    env = envforge.open("generated_envs/reference/crate_dock")
    with env.session() as s:
        first = s.reset("level_01")
        step = s.step("move north")          # or {"action": "move", "params": {...}}
        step.reward, step.terminated, step.truncated

The folder's files are read on the host as data; its code runs only in a sandbox worker.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envforge.dsl_schema.actions import Action
from envforge.pipeline import layout
from envforge.pipeline.envfolder.action_text import ActionText
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError, not_a_folder
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient


class Environment:
    """An environment folder, read once on the host (its code is never imported here): the public face
    of its EnvSpec (`spec`), which the evaluation reads."""

    def __init__(self, path: str | Path):
        env = layout.EnvDir.at(path)
        if not env.is_env():
            found = not_a_folder(env.path) if not env.path.is_dir() else "missing " + ", ".join(env.missing_required())
            raise UserError(f"{path}: expected an environment folder with {', '.join(layout.REQUIRED_FILES)}, "
                            f"found {found}")
        self.spec = EnvSpec.open(env.path)

    name = property(lambda self: self.spec.name)
    path = property(lambda self: self.spec.path)
    config = property(lambda self: self.spec.config)
    instruction = property(lambda self: self.spec.instruction)
    action_text = property(lambda self: self.spec.action_space)
    actions: list[Action] = property(lambda self: list(self.spec.actions))
    tags = property(lambda self: self.spec.tags)

    @property
    def max_steps(self) -> int:
        """The episode's step cap: config.yaml's termination.max_steps (100 when absent)."""
        return self.spec.max_steps

    def levels(self, split: str = "test", difficulty: str | None = None) -> list[str]:
        """Level ids of a split ("test": levels/, "val": val_levels/), e.g. "levels/level_01.yaml";
        with `difficulty` (a band, easy|medium|hard, or a score range "LO..HI"), only the levels whose
        difficulty profile scores in it (a UserError when none does)."""
        if split not in layout.LEVEL_SPLITS:
            raise UserError(f"split: expected one of {', '.join(layout.LEVEL_SPLITS)}, found {split!r}")
        if difficulty is not None:
            return [str(level) for level in self.spec.in_band(difficulty, split)]
        return [str(level) for level in self.spec.levels(split)]

    def difficulty(self, level: str) -> dict | None:
        """The level's difficulty profile as written beside its max (pipeline/difficulty.py: "score",
        "band", each figure with whether it is exact); None when verify wrote none."""
        if not str(level).startswith("seed:") and not str(level).endswith(".yaml"):
            level = str(self.spec.level(level))  # "level_01" -> its id
        profile = self.spec.difficulty(level)
        return profile.to_dict() if profile is not None else None

    def curriculum(self, split: str = "test") -> list[str]:
        """The split's levels ordered easy to hard by difficulty score (unprofiled ones last, in file order)."""
        levels = self.levels(split)
        return sorted(levels, key=lambda lv: (p.score if (p := self.spec.difficulty(lv)) else 101, levels.index(lv)))

    def level(self, name: str) -> str:
        """The level id for "level_01", "levels/level_01.yaml" or "val_levels/level_11"."""
        return str(self.spec.level(name))

    def max_reward(self, level: str) -> float | None:
        """The max reward normalized scores on the level divide by (level_max_rewards.json): None when
        it has none, or when it must not divide (unknown, or a claim envforge verify found wrong)."""
        return self.spec.max_reward(level)

    def max_reward_note(self, level: str) -> str:
        """What a normalized score on the level must say about its max reward ("" when certified)."""
        return self.spec.max_note(level)

    def scored_levels(self, split: str = "test", max_levels: int | None = None,
                      left_out_of: str = "the task", difficulty: str | None = None,
                      curriculum: bool = False) -> list[tuple[str, float, str]]:
        """(level, max reward, note) for the first `max_levels` levels of `split` that a normalized score
        can divide by: a level whose max is unknown, zero or found wrong is left out, and said so on
        stderr ("left out of `left_out_of`"). One rule for Inspect's task and the verifiers environment."""
        kept = []
        levels = self.curriculum(split) if curriculum else self.levels(split)
        if difficulty is not None:
            inside = set(self.levels(split, difficulty))
            levels = [lv for lv in levels if lv in inside]
        for level in levels[:max_levels] if max_levels else levels:
            max_reward, note = self.spec.scoring_max(level)
            if (max_reward is None and note) or (max_reward is not None and max_reward <= 0):
                print(f"envforge: {self.name}/{layout.level_key(level)} left out of {left_out_of}: "
                      f"{note or f'its max reward is {max_reward:g}'}", file=sys.stderr)
                continue
            kept.append((level, max_reward, note))
        return kept

    def skins(self) -> list[str]:
        return self.spec.dir.skins()

    def parse_action(self, action: str | dict) -> dict:
        """An action dict from what `play` accepts (`move north`, `move direction=north`, JSON)
        or from a dict; ValueError says what was expected."""
        if isinstance(action, dict):
            if not isinstance(action.get("action"), str):
                raise ValueError('expected {"action": NAME, "params": {...}}')
            return {"action": action["action"], "params": dict(action.get("params") or {})}
        return ActionText(self.spec.actions).parse(str(action))

    def describe_actions(self) -> str:
        return ActionText(self.spec.actions).describe()

    def session(self, skin: str | None = None, limits: SandboxLimits | None = None) -> "Session":
        """A sandbox worker holding this environment; close it (or use `with`) when done."""
        if skin is not None and skin not in self.skins():
            raise UserError(f"skin: expected one of {', '.join(self.skins()) or '(none)'}, found {skin!r}")
        return Session(self, skin, limits)

    def __repr__(self) -> str:
        return f"Environment({str(self.path)!r})"


def open(path: str | Path) -> Environment:  # noqa: A001 - envforge.open(path) reads as intended
    return Environment(path)


@dataclass
class Step:
    """What the agent sees after a reset or a step."""

    observation: Any  # the rendered observation (text)
    info: Any = None  # the structured observation (omega) the text was rendered from
    reward: float = 0.0
    total_reward: float = 0.0
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the step cap (max_steps) was reached first
    steps: int = 0
    events: list[str] = field(default_factory=list)
    last_action_result: Any = None
    action: dict | None = None

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class Session:
    """One sandbox worker playing episodes of one environment, step by step."""

    def __init__(self, env: Environment, skin: str | None = None, limits: SandboxLimits | None = None):
        self.env = env
        self.client = EnvClient.start(env.spec, limits or SandboxLimits(call_seconds=10.0), skin=skin)
        self.level: str | None = None
        self.steps = 0
        self.total = 0.0
        self.last: Step | None = None

    def reset(self, level: str | None = None, seed: int | None = None) -> Step:
        """Start an episode on `level` (a level id; default: the first test level), or with
        `level=None` and a `seed` on the level the environment's generator makes from it."""
        if level is None and seed is not None:
            chosen = Level(seed=seed)
        else:
            chosen = self.env.spec.level(level) if level is not None else self._first_level()
        reply = self.client.reset(chosen, seed or 0, want_obs=True)  # the structured observation, not the state
        self.level = str(chosen)
        self.steps, self.total = 0, 0.0
        self.last = Step(reply.observation, reply.raw_obs)
        return self.last

    def step(self, action: str | dict) -> Step:
        if self.last is None:
            raise RuntimeError("step before reset: call reset() first")
        if self.last.done:
            raise RuntimeError("the episode has ended: call reset() for a new one")
        action = action if isinstance(action, dict) else self.env.parse_action(action)
        reply = self.client.step(action, want_obs=True)
        self.steps += 1
        self.total += reply.reward
        # The cap is the runtime's (the client counts it), terminated and truncated apart.
        self.last = Step(reply.observation, reply.raw_obs, reply.reward, self.total, reply.terminated,
                         reply.truncated, self.steps, reply.events, reply.last_action_result, action)
        return self.last

    def _first_level(self) -> Level:
        levels = self.env.spec.levels("test")
        if not levels:
            raise UserError(f"{self.env.path}: expected level files under {layout.LEVELS}/, found none; "
                            "reset with a seed instead")
        return levels[0]

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
