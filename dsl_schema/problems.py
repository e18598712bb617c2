"""Helpers for problems in a DSL document: filtering them, naming a field's path, showing a found value.

The `Problem` itself lives on the floor (pipeline.located), below every package that speaks it."""
from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

from envforge.pipeline.located import Problem

Rule = tuple[str, str, str]  # severity, where, rule: a row of docs/dsl_reference.md's "Semantic checks"
F = TypeVar("F", bound=Callable)


def rules(*declared: Rule) -> Callable[[F], F]:
    """Declares, on a check, the rules it enforces (its `rules`), so that the documentation of each
    rule stands at the code that enforces it; the reference lists them (semantics.RULES)."""
    def declare(check: F) -> F:
        check.rules = declared  # type: ignore[attr-defined]
        return check
    return declare


def errors(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def warnings(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "warning"]


def format_path(parts: Iterable[Any]) -> str:
    """('reward', 'events', 2, 'value_key') -> 'reward.events[2].value_key'."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


def show(value: Any, limit: int = 60) -> str:
    """A short, readable rendering of a found value for a message."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        text = f"{type_name(value)} {value!r}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def typed(value: Any) -> str:
    """A found value with its type: "string 'abc'", "integer 3", "mapping {...}"."""
    shown = show(value)
    return shown if isinstance(value, (dict, list, tuple)) or value is None else f"{type_name(value)} {shown}"


def type_name(value: Any) -> str:
    """The JSON/YAML name of a Python value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__
