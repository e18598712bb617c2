"""The floor: the located problem and the errors that carry it. It imports nothing of envforge,
so every package (dsl_schema, the folder reader, layout, the commands) can speak it.

A `Problem` is one finding, located in a file; a `LocatedError` is a file that is not what it
should be, carrying its Problem; a `UserError` is bad input from the user.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

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


class UserError(Exception):
    """Bad input from the user (missing file, malformed YAML, bad flag value).

    The message must say what was expected, what was found, and where.
    The CLI prints it and exits with status 2.
    """


class LocatedError(UserError):
    """A file that is not what it should be: the one located error of envforge. It carries the
    `Problem` (file, line when known, expected, found), so `envforge check` can report it as a
    finding and every other command as its one-line error, `file:line: expected …, found …`."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))

    @classmethod
    def at(cls, file: str, expected: str, found: str, line: int | None = None) -> "LocatedError":
        return cls(Problem(file, "", expected, found, line=line))
