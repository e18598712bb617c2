"""envforge environments as Gymnasium environments (`pip install 'envforge-rl[gym]'`).

    env = envforge.make("generated_envs/reference/crate_dock")
    obs, info = env.reset(seed=0)                 # obs: the rendered text; info["observation"]: the data
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

The observation is the text the environment renders (its skin), the structured observation it was
rendered from is `info["observation"]`. The action space comes from config.yaml's declared actions:
`Discrete(n)` over every (action, parameter values) combination when the DSL declares every
parameter's values and they can be listed whole (an enum or a small integer range:
ActionSpace.complete), else a `Text` action parsed as `envforge play` parses what a person types (`move north`, `move
direction=north` or JSON).
`env.actions[i]` is the action dict of a Discrete index. The environment's code runs in a sandbox
worker, started at the first reset and stopped by `close()`.
"""
from __future__ import annotations

import copy
import json
import string
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

from envforge.pipeline import layout, manifest, paths, safe_io
from envforge.pipeline.api.environment import Environment, Session, Step
from envforge.pipeline.envfolder.actions import ActionSpace
from envforge.pipeline.errors import UserError
from envforge.pipeline.sandbox import SandboxLimits

MAX_DISCRETE_ACTIONS = 10_000  # more combinations than this: a Text action space instead
MAX_TEXT_ACTION = 512
DEFAULT_MAX_OBSERVATION_CHARS = 65_536
ID_PREFIX = "envforge"
_PRINTABLE = "".join(c for c in string.printable if c not in "\x0b\x0c")


class RenderedText(spaces.Text):
    """Text of any characters (an environment draws boards with whatever it likes) up to
    `max_length`; samples are drawn from printable ASCII."""

    def __init__(self, max_length: int, seed: int | None = None):
        super().__init__(max_length, min_length=0, charset=_PRINTABLE, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"RenderedText({self.max_length})"


def discrete_actions(space: ActionSpace, levels: list[tuple[str, Any]] = ()) -> list[dict] | None:
    """A fixed list of the action dicts of the space, or None (then the space is Text): every
    combination when config.yaml declares every parameter's domain whole (ActionSpace.complete);
    else, when each parameter's values can be read (action_space.txt, or each of `levels`, as
    (source, state) pairs: ActionSpace.for_state), the actions of every level in order, each once.
    An action of one level may be invalid on another: it then uses a step as an invalid action
    does. At most MAX_DISCRETE_ACTIONS."""
    if not space:
        return None
    if space.complete(guesses=True):
        actions = space.candidates()
    elif levels:
        actions, seen = [], set()
        for source, state in levels:
            on_level = space.for_state(state, source)
            if not on_level.complete(guesses=True):
                return None
            for action in on_level.candidates():
                key = json.dumps(action, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    actions.append(action)
    else:
        return None
    return actions if len(actions) <= MAX_DISCRETE_ACTIONS else None


class EnvforgeEnv(gymnasium.Env):
    """One envforge environment folder behind Gymnasium's `reset`/`step`/`render`/`close`."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # ansi: render() returns the text

    def __init__(self, path: str | Path, level: str | None = None, split: str = "test", skin: str | None = None,
                 action_space: str = "auto", render_mode: str | None = None,
                 max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS, limits: SandboxLimits | None = None,
                 difficulty: str | None = None):
        """`level`: always this level (an id such as "level_01"); else `reset` draws one of the
        split's levels ("test" or "val") with the env's RNG, or generates one from the seed when the
        folder has no levels. `difficulty`: draw only the split's levels in that band (easy, medium,
        hard, or a score range "LO..HI" of their difficulty profiles). `skin`: render through
        skins/<skin>.py. `action_space`: "auto" (Discrete where the DSL allows it, else Text) or "text"."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise UserError(f"render_mode: expected one of {self.metadata['render_modes']}, found {render_mode!r}")
        if action_space not in ("auto", "text"):
            raise UserError(f"action_space: expected 'auto' or 'text', found {action_space!r}")
        self.env = Environment(path)
        self.fixed_level = self.env.level(level) if level is not None else None
        self.split = split
        self.split_levels = self.env.levels(split, difficulty)
        self.skin, self.limits = skin, limits
        if skin is not None and skin not in self.env.skins():
            raise UserError(f"skin: expected one of {', '.join(self.env.skins()) or '(none)'}, found {skin!r}")
        self.render_mode = render_mode
        self.max_steps = self.env.max_steps
        self.actions = discrete_actions(self.env.spec.actions, self._level_states()) if action_space == "auto" else None
        self.action_space = (spaces.Discrete(len(self.actions)) if self.actions is not None
                             else spaces.Text(MAX_TEXT_ACTION, min_length=1, charset=_PRINTABLE))
        self.observation_space = RenderedText(max_observation_chars)
        self.session: Session | None = None
        self.last: Step | None = None
        self.level: str | None = None
        self._max_reward: float | None = None  # the level's, read once an episode
        self._difficulty: dict | None = None  # the level's, read once an episode

    def _level_states(self) -> list[tuple[str, Any]]:
        """The level files this env plays, read as data (bounded, link-free; no environment code
        runs): where an untyped action parameter takes its values from. None readable: []."""
        if self.env.spec.actions.complete(guesses=True):
            return []
        states = []
        for level in [self.fixed_level] if self.fixed_level else self.split_levels:
            try:
                states.append((level, safe_io.load_yaml(self.env.path, level)))
            except (UserError, OSError):
                return []
        return states

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """`options`: {"level": id} plays that level; {"difficulty": band} one of the split's levels
        in that band; {"generate": True} a level generated from the seed (drawn from the env's RNG
        when `seed` is None)."""
        super().reset(seed=seed)
        options = options or {}
        level = options.get("level") or self.fixed_level
        pool = self.env.levels(self.split, options["difficulty"]) if options.get("difficulty") else self.split_levels
        if level is None and pool and not options.get("generate"):
            level = pool[int(self.np_random.integers(len(pool)))]
        env_seed = int(self.np_random.integers(2**31 - 1))
        if self.session is None:
            self.session = self.env.session(self.skin, self.limits)
        self.last = self.session.reset(level, seed=env_seed)
        self.level = self.session.level
        generated = self.level.startswith("seed:")
        self._max_reward = None if generated else self.env.max_reward(self.level)
        self._difficulty = None if generated else self.env.difficulty(self.level)
        return self._observation(self.last), self._info(self.last)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self.session is None or self.last is None:
            raise RuntimeError("step before reset: call reset() first")
        invalid = None
        try:
            decoded = self.decode(action)
        except ValueError as e:
            # Not an action of the space: the environment gets it as an unknown action, as it gets
            # what any agent sends, so it uses up a step and the episode's cap stays the runtime's.
            invalid, decoded = str(e), {"action": str(action), "params": {}}
        self.last = self.session.step(decoded)
        info = self._info(self.last) | ({"invalid_action": invalid} if invalid else {})
        return self._observation(self.last), self.last.reward, self.last.terminated, self.last.truncated, info

    def decode(self, action: Any) -> dict:
        """The action dict of an element of the action space (or of a dict or text action)."""
        if isinstance(action, dict):
            return self.env.parse_action(action)
        if self.actions is not None and not isinstance(action, str):
            index = int(action)
            if not 0 <= index < len(self.actions):
                raise ValueError(f"expected an action index from 0 to {len(self.actions) - 1}, found {index}")
            return self.actions[index]
        return self.env.parse_action(str(action))

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._observation(self.last) if self.last is not None else None
        return None

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        super().close()

    def _observation(self, step: Step) -> str:
        text = step.observation if isinstance(step.observation, str) else str(step.observation)
        if not self.observation_space.contains(text):
            raise ValueError(f"{self.env.name}: the observation has {len(text)} characters, more than the "
                             f"observation space's {self.observation_space.max_length}; pass max_observation_chars")
        return text

    def _info(self, step: Step) -> dict:
        # Every value is the worker's fresh reply, held by nothing else a caller could change by
        # changing it, but the action (a Discrete index's dict is self.actions' own) and the level's
        # difficulty (read once an episode): those are copied. A deep copy of the whole info, the
        # structured observation included, cost more than the step.
        return {
            "observation": step.info,
            "level": self.level,
            "steps": step.steps,
            "total_reward": step.total_reward,
            "max_reward": self._max_reward,
            "events": step.events,
            "last_action_result": step.last_action_result,
            "action": copy.deepcopy(step.action),
            "difficulty": copy.deepcopy(self._difficulty),
        }


def make(path: str | Path, level: str | None = None, split: str = "test", skin: str | None = None,
         **kwargs: Any) -> EnvforgeEnv:
    """A Gymnasium environment for the envforge environment folder at `path` (see EnvforgeEnv),
    with a spec as `gymnasium.make` gives one (id envforge/<name>-v0, max_episode_steps the config's
    termination.max_steps; `env.spec.make()` makes another)."""
    env = EnvforgeEnv(path, level=level, split=split, skin=skin, **kwargs)
    env.spec = gymnasium.envs.registration.EnvSpec(
        id=env_id(path), entry_point=f"{__name__}:EnvforgeEnv", max_episode_steps=env.max_steps,
        kwargs={"path": str(Path(path).resolve()), "level": level, "split": split, "skin": skin, **kwargs})
    return env


def make_vec(path: str | Path, num_envs: int, vectorization_mode: str = "sync", **kwargs: Any):
    """`num_envs` copies at once, each with its own sandbox worker: a Gymnasium vector env."""
    factories = [partial(make, path, **kwargs) for _ in range(num_envs)]
    if vectorization_mode == "async":
        return gymnasium.vector.AsyncVectorEnv(factories, shared_memory=False)
    if vectorization_mode != "sync":
        raise UserError(f"vectorization_mode: expected 'sync' or 'async', found {vectorization_mode!r}")
    return gymnasium.vector.SyncVectorEnv(factories)


def env_id(path: str | Path) -> str:
    return f"{ID_PREFIX}/{Path(path).resolve().name}-v0"


def register(root: str | Path = paths.GENERATED_ENVS_DIR) -> list[str]:
    """Register with Gymnasium, as `envforge/<name>-v0` (max_episode_steps: the config's
    termination.max_steps), every environment folder under `root` (not _rejected/ or _work/) that
    envforge accepted (pipeline.manifest.acceptance: its verify's verdict, or a person's decision), so
    `gymnasium.make("envforge/crate_dock-v0")` works; returns the ids. Each folder left out (verify
    rejected it, or none judged it) is named, with why, in one warning."""
    envs = layout.find_envs(root)
    if not envs:
        raise UserError(f"{root}: expected environment folders ({', '.join(layout.REQUIRED_FILES)}), found none")
    ids, skipped = [], []
    for env in envs:
        decided = manifest.acceptance(env.path)
        if not decided.accepted:
            skipped.append(f"{env.name}: {decided.why}")
            continue
        ids.append(env_id(env.path))
        gymnasium.register(id=ids[-1], entry_point=f"{__name__}:EnvforgeEnv", kwargs={"path": str(env.path)},
                           max_episode_steps=Environment(env.path).max_steps)
    if skipped:
        warnings.warn(f"envforge.register: {len(skipped)} environment folder(s) under {root} not registered, "
                      "envforge did not accept them: " + "; ".join(skipped), stacklevel=2)
    return ids
