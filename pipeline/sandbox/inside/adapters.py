"""Worker-side adapters: the shapes validators and generators written elsewhere come in.

envforge's own form is `validate_level(state) -> (ok, issues)` and `max_reward(state)` as
module functions of env_validator.py. Environments in the published AutoEnv format come in more
shapes, all accepted here:
  * a function, or a method of a class (built with no argument, or with the env's config);
  * named `validate_level` or `validate_world`;
  * given the level's state, the path of a level file, or a world id (a file stem under levels/),
    told apart by the parameter's name and annotation;
  * answering `(ok, issues)`, `(ok, issues, warnings)`, a dict (`valid`/`is_valid`, `issues`/
    `errors`, `warnings`) or an object with `is_valid` and `issues`.
A validator that fits none is a located problem naming the file, the function and the shapes tried.
"""
from __future__ import annotations

import copy
import importlib
import inspect
import os
from pathlib import Path
from typing import Any, Callable

from envforge.pipeline import layout
from envforge.pipeline.runtime.levels import save_level

VALIDATE_NAMES = ("validate_level", "validate_world")
BOUND_NAMES = ("max_reward", "calculate_max_reward", "compute_max_reward")
SHAPES = ("validate_level or validate_world, as a function or a method of a class built with no argument "
          "or with the config, given a state, a level file path or a world id, answering (ok, issues), "
          "(ok, issues, warnings), a dict with valid/is_valid and issues/errors, or an object with "
          "is_valid and issues")
_SCRATCH = "__envforge_validate"


class AdapterError(Exception):
    """The env's validator or generator fits none of the accepted shapes (file and function named)."""

    def __init__(self, detail: str, where: str):
        super().__init__(detail)
        self.detail, self.where = detail, where


class Validator:
    """The env's validator in one shape: `check(state, level=None) -> (ok, issues, warnings)`."""

    def __init__(self, module, config: dict | None):
        self.function, self.name, self.bound = _find(module, config)
        self.takes = _takes(self.function)

    def check(self, state: dict, level: str | None = None) -> tuple[bool, list[str], list[str]]:
        arg, scratch = self._argument(state, level)
        try:
            verdict = self.function(arg)
        finally:
            if scratch is not None:
                scratch.unlink(missing_ok=True)
        return _verdict(verdict, self.name)

    def max_reward(self, state: dict) -> Any:
        if self.bound is None or self.takes != "state":
            return None  # a bound read from a file path or id is not offered by any known env
        return self.bound(copy.deepcopy(state))

    def _argument(self, state: dict, level: str | None) -> tuple[Any, Path | None]:
        if self.takes == "state":
            return copy.deepcopy(state), None
        if level is not None and self.takes == "path":
            return level, None
        if level is not None and Path(level).parent.name == layout.LEVELS and Path(level).parent.parent == Path("."):
            return Path(level).stem, None
        scratch = Path(layout.LEVELS) / f"{_SCRATCH}_{os.getpid()}.yaml"
        save_level(scratch, state)
        return (str(scratch) if self.takes == "path" else scratch.stem), scratch


def load_validator(config: dict | None) -> Validator:
    try:
        module = importlib.import_module(layout.ENV_VALIDATOR.removesuffix(".py"))
    except ModuleNotFoundError as e:
        if e.name != layout.ENV_VALIDATOR.removesuffix(".py"):
            raise
        raise AdapterError(f"no {layout.ENV_VALIDATOR}: expected a level validator", layout.ENV_VALIDATOR) from None
    return Validator(module, config)


def _find(module, config: dict | None) -> tuple[Callable, str, Callable | None]:
    """(validate function, its name for messages, max-reward function or None)."""
    for name in VALIDATE_NAMES:
        fn = getattr(module, name, None)
        if inspect.isfunction(fn) and fn.__module__ == module.__name__:
            return fn, name, _first_attr(module, BOUND_NAMES)
    for cls in _own_classes(module):
        name = next((n for n in VALIDATE_NAMES if callable(getattr(cls, n, None))), None)
        if name is not None:
            instance = _build(cls, config)
            return getattr(instance, name), f"{cls.__name__}.{name}", _first_attr(instance, BOUND_NAMES)
    raise AdapterError(f"{layout.ENV_VALIDATOR}: expected {SHAPES}; found none of them "
                       f"(functions: {', '.join(_public(module)) or 'none'})", layout.ENV_VALIDATOR)


def _own_classes(module) -> list[type]:
    return [obj for obj in vars(module).values() if inspect.isclass(obj) and obj.__module__ == module.__name__]


def _first_attr(obj, names) -> Callable | None:
    return next((getattr(obj, n) for n in names if callable(getattr(obj, n, None))), None)


def _public(module) -> list[str]:
    return [n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
            and v.__module__ == module.__name__]


def _build(cls: type, config: dict | None):
    """A validator class built with no argument when it allows it, else with the config (the
    config.yaml path when its one parameter names a path)."""
    params = [p for p in _parameters(cls.__init__)[1:]
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not params:
        return cls()
    if len(params) == 1:
        return cls(layout.CONFIG if "path" in params[0].name or "file" in params[0].name else copy.deepcopy(config))
    raise AdapterError(f"{layout.ENV_VALIDATOR}: {cls.__name__}.__init__: expected no required argument or one "
                       f"(the config), found {len(params)} ({', '.join(p.name for p in params)})", layout.ENV_VALIDATOR)


def _parameters(fn) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def _takes(fn: Callable) -> str:
    """What the validator's first parameter is: "state", "path" or "id"."""
    params = [p for p in _parameters(fn) if p.name != "self"]
    if not params:
        raise AdapterError(f"{layout.ENV_VALIDATOR}: {getattr(fn, '__qualname__', fn)}: expected one parameter "
                           f"(a state, a level file path or a world id), found none", layout.ENV_VALIDATOR)
    name = params[0].name.lower()
    note = params[0].annotation
    note = note if isinstance(note, str) else getattr(note, "__name__", str(note))
    if "dict" in note.lower() or any(w in name for w in ("state", "data")):
        return "state"
    if "path" in name or "file" in name:
        return "path"
    if name.endswith("id") or name == "world":
        return "id"
    return "path" if note == "str" else "state"


def _verdict(value: Any, name: str) -> tuple[bool, list[str], list[str]]:
    ok = issues = None
    warnings: Any = []
    if isinstance(value, bool):
        ok, issues = value, []
    elif isinstance(value, (tuple, list)) and len(value) in (2, 3) and isinstance(value[0], bool):
        ok, issues = value[0], value[1]
        warnings = value[2] if len(value) == 3 else []
    elif isinstance(value, dict):
        ok = next((value[k] for k in ("valid", "is_valid", "ok", "success") if k in value), None)
        issues = next((value[k] for k in ("issues", "errors", "problems") if k in value), [])
        warnings = value.get("warnings") or []
    elif hasattr(value, "is_valid") or hasattr(value, "valid"):
        ok = getattr(value, "is_valid", getattr(value, "valid", None))
        issues = getattr(value, "issues", getattr(value, "errors", []))
        warnings = getattr(value, "warnings", [])
    if not isinstance(ok, bool) and type(ok).__name__ != "bool_":
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise AdapterError(f"{layout.ENV_VALIDATOR}: {name}: expected {SHAPES}; found {shown}", layout.ENV_VALIDATOR)
    return bool(ok), _texts(issues), _texts(warnings)


def _texts(items: Any) -> list[str]:
    if items is None:
        return []
    if isinstance(items, (str, dict)):
        items = [items]
    try:
        return [str(i) for i in items]
    except TypeError:
        return [str(items)]


def level_files() -> set[str]:
    """The level files the env's own loaders see (AutoEnv envs read ./levels/<id>.yaml)."""
    folder = Path(layout.LEVELS)
    return {p.name for p in folder.glob("*.yaml")} if folder.is_dir() else set()


def generator_mismatch(seed: int | None, env) -> AdapterError | None:
    """Why the env's generate mode failed, when the generator is at fault: an AutoEnv generator
    (`generate(seed) -> world id`) whose returned id names no file in levels/ though it wrote one.
    None when the generator cannot be blamed this way (the env's own failure stands)."""
    module = __import__("sys").modules.get(layout.ENV_GENERATE.removesuffix(".py"))
    if module is None:
        return None
    for cls in _own_classes(module):
        generate = getattr(cls, "generate", None)
        if not callable(generate) or inspect.isabstract(cls):
            continue
        before = level_files()
        try:
            world_id = cls(getattr(env, "env_id", None), copy.deepcopy(getattr(env, "configs", None))).generate(seed)
        except Exception:  # noqa: BLE001 - a generator that fails here fails in the env too
            return None
        after = level_files()
        written = (
            sorted(after - before) or sorted(f for f in after if f.endswith((f"_{world_id}.yaml", f"-{world_id}.yaml")))
            if isinstance(world_id, str)
            else []
        )
        if not isinstance(world_id, str) or (Path(layout.LEVELS) / f"{world_id}.yaml").is_file() or not written:
            return None
        try:
            line = inspect.getsourcelines(generate)[1]
        except (OSError, TypeError):
            line = None
        where = f"{layout.ENV_GENERATE}:{line}" if line else layout.ENV_GENERATE
        return AdapterError(f"{cls.__name__}.generate(seed={seed}) returned the world id {world_id!r}, but "
                            f"levels/{world_id}.yaml does not exist: it wrote levels/{written[0]} (a world id "
                            f"names the file levels/<id>.yaml the env loads)", where)
    return None
