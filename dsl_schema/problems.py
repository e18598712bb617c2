"""A located problem in a DSL document: what the checker, the CLI and the repair loop exchange."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding, located: in a DSL document at a field path, or in an environment's files at
    a line. The one problem type of envforge: the DSL checker, `envforge check`, the static scan
    and the repair loop all speak it.

    `str(problem)` is `FILE: path.to.field: expected …, found …` for a field of a structured file
    (`path` is a dotted path with list indices, `reward.events[2].value_key`; `(file)` and
    `(document)` for the file or document as a whole; YAML syntax errors `line N, column M`), and
    `FILE:LINE: expected …, found …` for a line of code. `line` is 1-based.
    """

    file: str
    path: str
    expected: str
    found: str
    severity: Severity = "error"
    line: int | None = None
    check: str = ""  # which check found it (envforge check: layout, static, levels, ...)

    def __str__(self) -> str:
        file = self.file or "(unnamed file)"  # a message never starts with an empty location
        if self.path:
            return f"{file}: {self.path}: expected {self.expected}, found {self.found}"
        where = f"{file}:{self.line}" if self.line else file
        return f"{where}: expected {self.expected}, found {self.found}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
