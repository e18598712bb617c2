"""Write small environment folders for tests: a sound one, and broken variants of it.

A one-dimensional corridor: the agent moves left or right and scores 1 on reaching the goal (to
the right of the start on some levels, to the left on others: repeating one move is no skill).
Each broken variant replaces one piece of source, so a test names exactly what is wrong.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

ENV_MAIN = '''
from pipeline.runtime import SkinEnv


class Corridor(SkinEnv):
    def transition(self, action):
        name, params = action.get("action"), action.get("params") or {}
        if name == "move" and params.get("direction") in ("left", "right"):
            step = 1 if params["direction"] == "right" else -1
            self._state["pos"] = max(0, min(self._state["length"] - 1, self._state["pos"] + step))
            self._last_action_result = "moved " + params["direction"]
        else:
            self._last_action_result = "unknown action; use move with direction left or right"
        return self._state

    def reward(self, action):
        reached = self._state["pos"] == self._state["goal"]
        return (1.0, ["goal"], {}) if reached else (0.0, [], {})

    def done(self, state=None):
        return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps

    def render_skin(self, omega):
        cells = ["." for _ in range(self._state["length"])]
        cells[self._state["goal"]] = "G"
        cells[self._state["pos"]] = "@"
        return f"step {omega['t']}: " + "".join(cells)
'''

ENV_GENERATE = '''
import random


def generate_level(seed, config):
    rng = random.Random(seed)
    length = 6 + seed % 5  # consecutive seeds always give different corridors
    if seed % 2:  # start at either end, so no one direction repeated reaches every goal
        return {"pos": length - 1, "goal": rng.randint(0, length - 3), "length": length}
    return {"pos": 0, "goal": rng.randint(2, length - 1), "length": length}
'''

ENV_VALIDATOR = '''
def validate_level(state):
    issues = []
    if not 0 <= state.get("goal", -1) < state.get("length", 0) or state.get("goal") == state.get("pos"):
        issues.append("goal must lie inside the corridor, away from the start")
    return (not issues, issues)


def max_reward(state):
    return 1.0
'''

CONFIG = {
    "meta": {"id": "corridor", "name": "Corridor", "description": "Walk to the goal.",
             "tags": {"reward": "binary", "observation": "full", "semantics": "aligned"}},
    "state_template": {"pos": 0, "goal": 3, "length": 6},
    "observation": {"policy": "full", "params": {}, "expose": ["pos", "goal", "length", "t"]},
    "reward": {"events": [{"trigger": "goal", "value_key": "goal_rewards"}], "goal_rewards": {"reached": 1.0}},
    "transition": {"actions": [{"name": "move", "description": "Step left or right.",
                                "params": [{"name": "direction", "type": "string", "enum": ["left", "right"]}]}]},
    "skin": {"type": "text", "template": "step {t}"},
    "termination": {"max_steps": 12, "conditions": ["pos == goal"]},
    "generator": {"mode": "procedural", "output_format": "yaml",
                  "pipeline": [{"name": "place_goal", "desc": "Put the goal somewhere", "args": {}}],
                  "randomization": {"seed_based": True, "parameters": {}}},
}

LEVELS = {"levels/level_01.yaml": {"pos": 0, "goal": 3, "length": 6},
          "levels/level_02.yaml": {"pos": 7, "goal": 2, "length": 8},
          "val_levels/level_03.yaml": {"pos": 0, "goal": 2, "length": 7}}


def write_env(path: Path, replace: dict[str, str] | None = None, drop: tuple[str, ...] = (),
              config: dict | None = None, levels: dict | None = None) -> Path:
    """Write the corridor env to `path`; `replace` maps file name -> new source (or a
    (old, new) pair to substitute inside the default source)."""
    files = {"env_main.py": ENV_MAIN, "env_generate.py": ENV_GENERATE, "env_validator.py": ENV_VALIDATOR,
             "config.yaml": yaml.safe_dump(config or CONFIG, sort_keys=False)}
    for name, change in (replace or {}).items():
        if isinstance(change, tuple):
            assert change[0] in files[name], f"{change[0]!r} not in {name}"
            files[name] = files[name].replace(*change)
        else:
            files[name] = change
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        if name not in drop:
            (path / name).write_text(textwrap.dedent(text).lstrip())
    for rel, state in (LEVELS if levels is None else levels).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(yaml.safe_dump(state))
    return path
