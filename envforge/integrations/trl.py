"""envforge environments for TRL's `GRPOTrainer(environment_factory=...)` (TRL's own contract, read from
its GRPOTrainer: the environment is a class built once per rollout slot and reset per rollout, whose
public methods are the model's tools, with the reserved `reset(**row)` and an env-owned reward,
`get_reward()`). Nothing here imports TRL:

    from trl import GRPOConfig, GRPOTrainer
    import envforge.integrations.trl as et

    envs = et.TRLEnvironments("generated_envs/reference/crate_dock", split="val")
    trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", args=GRPOConfig(max_steps=100),
                          train_dataset=envs.train_dataset, environment_factory=envs.environment_factory)

- the dataset: a row per level of the split whose max reward can divide a score, its `prompt` the
  system text of evaluate's tools agent (templates/agents/tools_system.j2); TRL hands the row to
  `reset`, which starts the rollout's own sandbox worker (closing the last one), resets it on the
  row's level and returns the first turn's prompt (agents/react_step.j2), which TRL appends to it;
- the tools: one method per declared action, named after it, its parameters the action's (typed,
  their descriptions and choices in a Google-style docstring, as transformers' get_json_schema reads
  tools); a call is one turn of the episode, under evaluate's rules (pipeline/evaluate/stepwise.py),
  and returns the next turn's prompt, or how the episode ended;
- the reward: `get_reward()`, the episode's normalized reward (total / the level's certified max,
  clipped at 1), what `envforge evaluate` reports for the same actions; None (TRL leaves the rollout
  out) when the environment failed in the sandbox, as evaluate leaves such an episode out of its
  scores. With several environments, each has its class (and its tools), `environment_factory` is
  a dict by name and each row names its `environment`, as TRL routes them.
"""
from __future__ import annotations

import inspect
import json
import keyword
import re
import weakref
from pathlib import Path
from typing import Any

from envforge.pipeline import layout
from envforge.pipeline.api.environment import Environment
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.episode import INFRASTRUCTURE
from envforge.pipeline.evaluate.model_agents import with_system
from envforge.pipeline.evaluate.stepwise import StepwiseEpisode

AGENT = "trl"  # the agent field of an episode's record
RESERVED = ("reset", "get_reward")  # TRL's reserved method names: never tools
JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


class EnvforgeEnvironment:
    """One rollout slot of one environment (TRLEnvironments makes a subclass per environment, whose
    tool methods are its actions). TRL makes an instance per concurrent rollout and resets it per rollout."""

    SPEC: EnvSpec  # set on each environment's subclass

    def __init__(self):
        self._episode: StepwiseEpisode | None = None
        self._closer: weakref.finalize | None = None

    def reset(self, level: str = "", max_reward: float | None = None, max_note: str = "", skin: str | None = None,
              **row: Any) -> str:
        """A fresh sandbox worker on the row's level; the first turn's prompt (TRL appends it to the row's)."""
        self._close()
        if not level:
            raise UserError(f"{type(self).__name__}.reset: expected a dataset row with a `level` "
                            "(TRLEnvironments.train_dataset), found none")
        self._episode = StepwiseEpisode(self.SPEC, level, max_reward, max_note, skin=skin)
        self._closer = weakref.finalize(self, self._episode.close)  # the worker ends with its instance at the latest
        return "\n\n" + self._episode.start()

    def get_reward(self) -> float | None:
        """The episode's normalized reward (0 when nothing scored); None when its environment failed."""
        if self._episode is None:
            return 0.0
        record = self._episode.record(AGENT)
        self._close()
        if record.stop_reason in INFRASTRUCTURE:
            return None
        return float(record.normalized or 0.0)

    def _act(self, name: str, params: dict) -> str:
        if self._episode is None:
            return "No episode is running: the environment was not reset."
        return self._episode.act({"action": name, "params": dict(params)})

    def _close(self) -> None:
        if self._closer is not None:
            self._closer()  # closes the worker once (finalize runs at most once)
        self._closer = None


def _tool(schema: dict):
    """The method for one action: its signature, annotations and docstring describe the action's
    parameters as transformers' get_json_schema reads a tool; called with the model's arguments as
    they came (TRL calls `tool(**arguments)`), the environment judges them, as evaluate's tools agent."""
    name = schema["name"]

    def tool(self, **params):
        return self._act(name, params)

    properties = schema["parameters"].get("properties", {})
    required = set(schema["parameters"].get("required", []))
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for param, prop in properties.items():
        hint = JSON_TYPES.get(prop.get("type"), str)
        annotations[param] = hint if param in required else hint | None
        default = inspect.Parameter.empty if param in required else None
        parameters.append(inspect.Parameter(param, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            annotation=annotations[param], default=default))
        choices = f" (choices: {json.dumps(list(prop['enum']))})" if prop.get("enum") else ""
        lines.append(f"    {param}: {_one_line(prop.get('description') or param)}{choices}")
    annotations["return"] = str
    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(parameters, return_annotation=str)
    tool.__annotations__ = annotations
    tool.__doc__ = (f"{_one_line(schema['description'])}\n\n" + ("Args:\n" + "\n".join(lines) + "\n\n" if lines else "")
                    + "Returns:\n    What the environment shows next, or how the episode ended.")
    return tool


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


def environment_class(spec: EnvSpec) -> type[EnvforgeEnvironment]:
    """The EnvforgeEnvironment subclass of one environment: a tool method per declared action."""
    methods = {}
    for schema in spec.tools:
        name = schema["name"]
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or name in RESERVED \
                or hasattr(EnvforgeEnvironment, name):
            raise UserError(f"{spec.path}: action {name!r}: expected a name TRL can expose as a tool (an identifier, "
                            f"not {', '.join(RESERVED)} or starting with _), found one it cannot")
        bad = [p for p in schema["parameters"].get("properties", {}) if not p.isidentifier() or keyword.iskeyword(p)]
        if bad:
            raise UserError(f"{spec.path}: action {name!r}: expected parameter names that are identifiers, found "
                            f"{', '.join(map(repr, bad))}")
        methods[name] = _tool(schema)
    slug = re.sub(r"\W", "_", spec.name, flags=re.ASCII).strip("_") or "env"
    cls_name = "Envforge_" + slug
    return type(cls_name, (EnvforgeEnvironment,), {"SPEC": spec, "__qualname__": cls_name,
                                                   "__doc__": f"The envforge environment {spec.name!r}.", **methods})


class TRLEnvironments:
    """The environment folder(s) at `path` in TRL's three slots: `train_dataset` (a row per level),
    `environment_factory` (a class, or a dict of them by name with several environments) and, since
    each environment owns its reward (`get_reward`), no reward function."""

    def __init__(self, path: str | Path, split: str = "test", max_levels: int | None = None, skin: str | None = None):
        if split not in layout.LEVEL_SPLITS:
            raise UserError(f"split: expected one of {', '.join(layout.LEVEL_SPLITS)}, found {split!r}")
        found = layout.find_envs(path)
        if not found:
            raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) or a folder "
                            "holding some, found none")
        self.classes: dict[str, type[EnvforgeEnvironment]] = {}
        self.rows: list[dict] = []
        for env_dir in found:
            env = Environment(env_dir.path)
            if env.name in self.classes:
                raise UserError(f"{path}: expected environments whose names differ, found {env.name!r} twice")
            if skin is not None and skin not in env.skins():
                raise UserError(f"skin: expected one of {', '.join(env.skins()) or '(none)'} for {env.name}, "
                                f"found {skin!r}")
            self.classes[env.name] = environment_class(env.spec.playable())
            system = with_system({"instruction": env.instruction, "action_space": env.action_text,
                                  "actions": [a.name for a in env.actions]}, "agents/tools_system.j2")["system"]
            for level, max_reward, note in env.scored_levels(split, max_levels, "the TRL dataset"):
                self.rows.append({"prompt": [{"role": "user", "content": system}], "environment": env.name,
                                  "level": level, "max_reward": max_reward, "max_note": note, "skin": skin})
        if not self.rows:
            raise UserError(f"{path}: expected level files under {layout.LEVEL_SPLITS[split]}/ with a usable max "
                            "reward, found none")

    @property
    def environment_factory(self):
        """GRPOTrainer's `environment_factory`: the environment's class, or a dict of them by name."""
        return next(iter(self.classes.values())) if len(self.classes) == 1 else dict(self.classes)

    @property
    def train_dataset(self):
        """GRPOTrainer's `train_dataset`: a `datasets.Dataset` of `rows` (datasets comes with TRL)."""
        try:
            from datasets import Dataset
        except ImportError:
            raise UserError("TRLEnvironments.train_dataset: expected the `datasets` package (TRL installs it), "
                            "found it not installed; `pip install trl` (or `pip install datasets`), or use "
                            "`.rows`, the same rows as a list") from None
        return Dataset.from_list(self.rows)
