"""Runs inside the sandbox: the env class of a derived variant (see pipeline.probe.variants).

A variant is the env's own class with three optional changes, chosen by `select(spec)` through
the worker's `call` op and kept on the class (so snapshots and restores leave it alone):

    spec["swap"]         [a, b]: the effects of actions a and b trade places (changed dynamics)
    spec["state_delta"]  {path: delta}: added to a number of the state at every reset (a changed
                         rule constant, e.g. tide.rise_every)
    spec["goal"]         {omega field: value}: reward 1.0 and end the episode when the semantic
                         observation has these values, else reward 0.0 (what the planner searches for)
"""
from __future__ import annotations

import json
from typing import Any

from envforge.pipeline.runtime.observation import get_path

# The worker's own rule for which class of env_main is the environment: a variant must pick the same.
from envforge.pipeline.sandbox.inside.host import find_env_class


def derive(original_module, module_name: str) -> type:
    base = find_env_class(original_module)

    class Variant(base):
        spec: dict = {}

        def reset(self, *args, **kwargs):
            out = super().reset(*args, **kwargs)
            for path, delta in (self.spec.get("state_delta") or {}).items():
                set_path(self._state, path, get_path(self._state, path) + delta)
            return out

        def step(self, action):
            swap = self.spec.get("swap")
            if swap:
                key = canonical_action(action)
                action = (
                    swap[1]
                    if key == canonical_action(swap[0])
                    else swap[0]
                    if key == canonical_action(swap[1])
                    else action
                )
            out = super().step(action)
            goal = self.spec.get("goal")
            if goal is None:
                return out
            state, _, done, info = out
            omega = info.get("raw_obs") if isinstance(info, dict) and "raw_obs" in info else self.observe_semantic()
            met = meets(omega, goal)
            return state, 1.0 if met else 0.0, bool(done) or met, info

    Variant.__name__ = Variant.__qualname__ = f"{base.__name__}Variant"
    Variant.__module__ = module_name  # the env finds its folder (config.yaml) through its module
    return Variant


def canonical_action(action: Any) -> str:
    if isinstance(action, dict):
        action = {"action": action.get("action"), "params": action.get("params") or {}}
    return json.dumps(action, sort_keys=True, default=str)


def meets(omega: Any, goal: dict) -> bool:
    """Whether the semantic observation has every field of `goal` (compared as canonical JSON)."""
    return isinstance(omega, dict) and all(
        k in omega and json.dumps(omega[k], sort_keys=True, default=str) == json.dumps(v, sort_keys=True, default=str)
        for k, v in goal.items())


def set_path(data: Any, path: str, value: Any) -> None:
    """data[a][b] = value for path "a.b" (list indices as numbers)."""
    *parents, last = path.split(".")
    for part in parents:
        data = data[int(part)] if isinstance(data, list) else data[part]
    data[int(last) if isinstance(data, list) else last] = value
