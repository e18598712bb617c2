"""Plain JSON data from what an environment holds: the one conversion at the JSON boundary.

Environments written elsewhere keep numpy scalars and arrays, tuples, sets and tuple-keyed dicts
in their state and observations. Those become numbers, lists and string keys ("(1, 2)" for a
tuple key, as `str` writes it), so replies stay JSON and equal states hash equal.
"""
from __future__ import annotations

import math
from typing import Any

_MAX_DEPTH = 200


class NotPlainData(TypeError):
    """A value the environment returned has no plain-JSON form (an arbitrary object, say)."""


def plain(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > _MAX_DEPTH:
        raise ValueError(f"data nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, dict):
        return {_key(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [plain(v, depth + 1) for v in value]
        return sorted(items, key=repr)
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, without importing numpy
    if callable(tolist) and type(value).__module__.split(".")[0] == "numpy":
        return plain(tolist(), depth + 1)
    raise NotPlainData(f"{type(value).__name__} is not plain data")


def _key(key: Any) -> str | int | float | bool | None:
    key = plain(key) if not isinstance(key, tuple) else key
    if isinstance(key, (str, int, float, bool)) or key is None:
        return key
    return str(tuple(plain(k) for k in key)) if isinstance(key, tuple) else str(key)
