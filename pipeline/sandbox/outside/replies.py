"""Host-side checks of a worker's replies: the worker runs untrusted code, so every reply is hostile.

The worker checks its own replies too (finite rewards, plain JSON), but the environment runs in
the same process and can patch those checks: they are a courtesy. Here every result is checked
for what the caller will rely on — its shape (keys and types per operation), finite numbers,
nesting depth and size — and anything else ends as a `SandboxFailure` of kind "protocol" (or
"invalid_reward" for a reward), a failure of that environment, so the run goes on.
"""
from __future__ import annotations

import math
from typing import Any

from envforge.pipeline.sandbox.outside.failures import SandboxFailure

MAX_DEPTH = 64  # levels of nested lists and mappings in one result
MAX_ITEMS = 2_000_000  # scalars, lists and mappings in one result
_INT_BOUND = 1 << 1024  # the first integer a float cannot hold

JSON = object()  # any plain JSON value (checked for depth, size and finite numbers)
NUMBER = (int, float)
OPTIONAL = type(None)


def plain(value: Any, op: str, what: str = "reply") -> Any:
    """`value`, if it is plain JSON of bounded depth and size with finite numbers only.

    Iterative, so a reply nested 20,000 deep costs no recursion (and raises no RecursionError).
    """
    todo, items = [(value, 1, what)], 0
    while todo:
        node, depth, path = todo.pop()
        items += 1
        if items > MAX_ITEMS:
            raise _bad(op, f"{what} holds more than {MAX_ITEMS:,} values")
        if depth > MAX_DEPTH:
            raise _bad(op, f"{path} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            items += len(node)
            for key, child in node.items():
                if not isinstance(key, str):
                    raise _bad(op, f"{path}: expected string keys, found {type(key).__name__}")
                _push(todo, child, depth, f"{path}.{key[:40]}" if depth < 8 else path, op)
        elif isinstance(node, list):
            items += len(node)
            for i, child in enumerate(node):
                _push(todo, child, depth, f"{path}[{i}]" if depth < 8 else path, op)
        elif not isinstance(node, (str, int, float, bool, type(None))):
            raise _bad(op, f"{path}: expected plain JSON, found {type(node).__name__}")
        else:
            _number(node, path, op)
    return value


def _push(todo: list, child: Any, depth: int, path: str, op: str) -> None:
    if isinstance(child, (dict, list)):
        todo.append((child, depth + 1, path))
    else:
        _number(child, path, op)


def _number(node: Any, path: str, op: str) -> None:
    """A number the host can compute with: finite, and an integer no larger than a float holds
    (JSON allows any length; `float(10**400)` raises OverflowError on the host)."""
    if isinstance(node, float) and not math.isfinite(node):
        raise _bad(op, f"{path}: expected a finite number, found {node!r}")
    if isinstance(node, int) and not -_INT_BOUND < node < _INT_BOUND:
        raise _bad(op, f"{path}: expected a number a float can hold, found an integer of {_digits(node)} digits")


def shaped(result: Any, op: str, fields: dict[str, Any]) -> dict:
    """`result` as a mapping holding `fields` (name -> type, tuple of types, or JSON for any),
    plain JSON throughout. A field whose types include None may be absent."""
    if not isinstance(result, dict):
        raise _bad(op, f"expected a mapping, found {type(result).__name__}")
    plain(result, op)
    for name, types in fields.items():
        if types is JSON:
            continue
        allowed = types if isinstance(types, tuple) else (types,)
        value = result.get(name)
        if name not in result and OPTIONAL in allowed:
            continue
        if name not in result:
            raise _bad(op, f"expected the field {name!r}, found none")
        if isinstance(value, bool) and bool not in allowed:
            raise _bad(op, f"{name}: expected {_names(allowed)}, found {value!r}")
        if not isinstance(value, allowed):
            raise _bad(op, f"{name}: expected {_names(allowed)}, found {type(value).__name__}")
    return result


def reward(value: Any, op: str, what: str = "reward") -> float:
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT_BOUND < value < _INT_BOUND:
        raise SandboxFailure("invalid_reward", f"{what}: expected a finite number, found an integer of "
                                               f"{_digits(value)} digits", op=op)
    if isinstance(value, bool) or not isinstance(value, NUMBER) or not math.isfinite(value):
        raise SandboxFailure("invalid_reward", f"{what}: expected a finite number, found {_short(value)}", op=op)
    return float(value)


def _bad(op: str, detail: str) -> SandboxFailure:
    return SandboxFailure("protocol", f"reply to '{op}': {detail}", op=op)


def _names(types: tuple) -> str:
    return " or ".join("null" if t is OPTIONAL else t.__name__ for t in types)


def _digits(value: int) -> int:
    return len(str(abs(value)))  # JSON parsing already capped its length


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
