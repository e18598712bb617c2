"""Level I/O: a level is the full initial state of a world, stored as YAML."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from envforge.pipeline.runtime.plain import plain


def load_level(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        state = yaml.safe_load(f)
    if not isinstance(state, dict):
        raise ValueError(f"{path}: expected a mapping (the level's state), found {type(state).__name__}")
    return state


class _LevelDumper(yaml.SafeDumper):
    """Safe YAML, with a tuple written as the sequence it is (YAML has no tuple; integer keys stay integers)."""


_LevelDumper.add_representer(tuple, lambda dumper, value: dumper.represent_list(list(value)))


def level_text(state: dict[str, Any]) -> str:
    """A level's YAML text, as save_level writes it."""
    return yaml.dump(state, Dumper=_LevelDumper, sort_keys=False, allow_unicode=True)


def save_level(path: str | Path, state: dict[str, Any]) -> None:
    # Imported here: the record writer brings every record model (pipeline.kinds), which a sandbox
    # worker, importing this module at each start, needs only when an env's generator saves a level.
    from envforge.pipeline import records

    records.write_text(path, level_text(state))


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def state_hash(state: Any) -> str:
    """Canonical hash of a state: equal states hash equal whatever their key order (numpy
    values and tuple keys as their plain JSON form)."""
    try:
        state = plain(state)
    except (TypeError, ValueError):
        pass  # objects that are not data: hashed by their str, as before
    return hashlib.sha256(canonical_json(state).encode()).hexdigest()[:16]
