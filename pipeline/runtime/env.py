"""The three-layer environment contract (AutoEnv paper, Appendix A).

BaseEnv  — true state, transition, reward, termination.
ObsEnv   — adds the observation policy: state -> semantic observation omega.
SkinEnv  — adds rendering: omega -> what the agent reads; and `step`.

A generated environment subclasses SkinEnv and writes only the rules of its world:
`transition`, `reward` and usually `done` and `render_skin`. Loading the DSL
(config.yaml), loading and generating levels and the observation policy come from here.
State is plain data (dicts, lists, numbers, strings), so an environment can be
snapshotted and restored by deep copy.

Actions are {"action": name, "params": {...}}. `step` returns
(next_state, reward, done, info) with info = {raw_obs, skinned, events, reward_info,
last_action_result}.
"""
from __future__ import annotations

import importlib
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import yaml

from envforge.pipeline import layout
from envforge.pipeline.runtime.levels import load_level, save_level
from envforge.pipeline.runtime.observation import ObservationPolicy, policy_from_config
from envforge.pipeline.runtime.termination import EndConditions


class BaseEnv(ABC):
    """Defines the true state, transition and reward."""

    def __init__(self, env_id: Any = 0):
        self.env_id = env_id
        self._t = 0
        self._history: list = []
        self._state: dict[str, Any] | None = None
        self.configs: dict[str, Any] | None = None
        # Set by transition() to tell the agent why an action did (not) work.
        self._last_action_result: Any = None
        self._dsl_config()

    # -- where the environment lives -------------------------------------------------
    @classmethod
    def env_dir(cls) -> Path:
        """The folder holding the module that defines the concrete environment class."""
        module = sys.modules.get(cls.__module__)
        file = getattr(module, "__file__", None)
        return Path(file).resolve().parent if file else Path.cwd()

    def _dsl_config(self) -> None:
        with open(self.env_dir() / layout.CONFIG, encoding="utf-8") as f:
            self.configs = yaml.safe_load(f) or {}

    @property
    def max_steps(self) -> int:
        from envforge.pipeline.envfolder.spec import max_steps  # the one rule, the host's too

        return max_steps(self.configs or {})

    # -- worlds ----------------------------------------------------------------------
    def reset(self, mode: str = "load", world_id: str | None = None, seed: int | None = None):
        """Load world `world_id` (mode "load") or generate one from `seed` (mode "generate")."""
        if mode not in ("load", "generate"):
            raise ValueError(f"reset: expected mode 'load' or 'generate', found {mode!r}")
        if mode == "generate":
            world_id = self._generate_world(seed)
        self._state = self._load_world(world_id)
        self._t, self._history, self._last_action_result = 0, [], None
        return self._state

    def _load_world(self, world_id: str) -> dict[str, Any]:
        """World ids are file stems ("level_01") or paths relative to the env folder."""
        base = self.env_dir()
        name = world_id if str(world_id).endswith(".yaml") else f"{world_id}.yaml"
        for folder in ("", layout.LEVELS, layout.VAL_LEVELS, layout.GENERATED_LEVELS):
            candidate = base / folder / name
            if candidate.is_file():
                return load_level(candidate)
        raise FileNotFoundError(f"no level file for world id {world_id!r} under {base}")

    def _generate_world(self, seed: int | None = None) -> str:
        """Run env_generate.generate_level(seed, config), save it, return its world id."""
        seed = 0 if seed is None else int(seed)
        generator = importlib.import_module(layout.ENV_GENERATE.removesuffix(".py"))
        state = generator.generate_level(seed, self.configs)
        world_id = f"seed_{seed}"
        save_level(self.env_dir() / layout.GENERATED_LEVELS / f"{world_id}.yaml", state)
        return world_id

    # -- rules -----------------------------------------------------------------------
    @abstractmethod
    def transition(self, action: dict[str, Any]) -> dict[str, Any]:
        """Apply {"action": name, "params": {...}} to self._state and return the new state."""

    @abstractmethod
    def reward(self, action: dict[str, Any]) -> tuple[float, list[str], dict[str, Any]]:
        """Reward of the transition just made: (value, event names, details)."""


class ObsEnv(BaseEnv):
    """Adds the observation interface: semantic observation from the true state.

    The policy is built from config.yaml's `observation` section: of the class an environment
    names in `observation_policy` (its own, from env_obs.py), else of the runtime policy the
    section names."""

    observation_policy: type[ObservationPolicy] | None = None

    def __init__(self, env_id: Any = 0, obs_policy: ObservationPolicy | None = None):
        super().__init__(env_id)
        self.obs_policy = obs_policy or policy_from_config((self.configs or {}).get("observation"),
                                                           self.observation_policy)

    def observe_semantic(self) -> dict[str, Any]:
        return self.obs_policy(self._state, self._t)


class SkinEnv(ObsEnv):
    """Adds rendering (semantic observation -> agent input) and the step loop."""

    def render_skin(self, omega: dict[str, Any]) -> Any:
        """Default skin: the DSL's skin.template filled from omega and the reserved names
        (max_steps, remaining_steps, last_action_result; `{name_display}` shows a list as lines),
        else omega as YAML."""
        template = ((self.configs or {}).get("skin") or {}).get("template")
        if template:
            try:
                return str(template).format(**_template_values(omega, self))
            except (KeyError, IndexError, ValueError):
                pass
        return yaml.safe_dump(omega, sort_keys=False, default_flow_style=None).strip()

    def done(self, state: dict[str, Any] | None = None) -> bool:
        """Default: only the step count; environments add their own end conditions."""
        return self._t >= self.max_steps

    def step(self, action: dict[str, Any]):
        self._last_action_result = None
        s_next = self.transition(action)
        reward, events, rinfo = self.reward(action)
        self._t += 1
        raw_obs = self.observe_semantic()
        agent_obs = self.render_skin(raw_obs)
        if_done = self.done(s_next)
        info = {
            "raw_obs": raw_obs,
            "skinned": agent_obs,
            "events": events,
            "reward_info": rinfo,
            "last_action_result": self._last_action_result,
        }
        return s_next, reward, if_done, info


def event_rewards(config: dict[str, Any] | None) -> dict[str, float]:
    """Event name -> reward, from the DSL's `reward.events` (trigger + value_key naming a value
    map, or an inline `value`). A value map is keyed by trigger; a map with a single value (the
    paper's B.4 form, `win_rewards: {agent_victory: 1.0}`) pays that value."""
    section = (config or {}).get("reward") or {}
    values: dict[str, float] = {}
    for event in section.get("events") or []:
        if not isinstance(event, dict) or "trigger" not in event:
            continue
        trigger = event["trigger"]
        if "value" in event:
            values[trigger] = float(event["value"])
            continue
        table = section.get(event.get("value_key"))
        if isinstance(table, dict) and trigger in table:
            values[trigger] = float(table[trigger])
        elif isinstance(table, dict) and len(table) == 1:
            values[trigger] = float(next(iter(table.values())))
    return values


class EventEnv(SkinEnv):
    """The shortest form of an environment: its rules as one pure function, its reward from the DSL.

    A subclass defines `rules(state, action) -> (next_state, events, message)` — a function of plain
    data that does not mutate `state`, so a validator or a search can play exactly the same rules —
    and usually `render_skin`. The runtime applies the rules in `transition`, `reward` pays each
    event the value config.yaml's `reward` section gives it, and `done` is true as soon as one of
    config.yaml's `termination.conditions` holds, so the code and the DSL cannot disagree. A
    subclass may still define its own `done`.
    """

    def __init__(self, env_id: Any = 0, obs_policy: ObservationPolicy | None = None):
        super().__init__(env_id, obs_policy)
        self.event_values = event_rewards(self.configs)
        self.end_conditions = EndConditions.of(self.configs)  # parsed once; a bad one fails the load
        self._events: list[str] = []  # written by transition, read by reward

    @staticmethod
    @abstractmethod
    def rules(state: dict[str, Any], action: dict[str, Any]) -> tuple[dict[str, Any], list[str], str]:
        """One step: (next state, event names, what happened — the agent reads it)."""

    def transition(self, action: dict[str, Any]) -> dict[str, Any]:
        self._state, self._events, self._last_action_result = self.rules(self._state, action)
        return self._state

    def reward(self, action: dict[str, Any]) -> tuple[float, list[str], dict[str, Any]]:
        paid = [e for e in self._events if e in self.event_values]
        return sum(self.event_values[e] for e in paid), list(self._events), {"rewarded_events": paid}

    def done(self, state: dict[str, Any] | None = None) -> bool:
        """Whether an end state is reached: any of config.yaml's termination.conditions holds in
        the state, with t, max_steps, remaining_steps and last_action_result as reserved names.
        The step cap is not an end state: the runtime truncates the episode there itself."""
        state = self._state if state is None else state
        names = {"t": self._t, "max_steps": self.max_steps, "remaining_steps": self.max_steps - self._t,
                 "last_action_result": self._last_action_result}
        return self.end_conditions.any_holds(state, names)


def _template_values(omega: dict[str, Any], env: SkinEnv) -> dict[str, Any]:
    values = {"max_steps": env.max_steps, "remaining_steps": env.max_steps - env._t,
              "last_action_result": env._last_action_result or "none yet"}
    for key, value in omega.items():  # every view has {key}_display (dsl_schema/names.py allows it)
        values[f"{key}_display"] = _display(value)
        values[key] = value
    return values


def _display(value: Any) -> str:
    """A list as one line per row (a row that is a list as its items joined by spaces); else str()."""
    if not isinstance(value, list):
        return str(value)
    return "\n".join(" ".join(map(str, r)) if isinstance(r, list) else str(r) for r in value)
