"""A located problem: what `envforge check` prints and what the repair loop feeds the model."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    file: str  # path relative to the environment folder
    line: int | None
    expected: str
    found: str
    check: str = ""  # which check found it
    severity: str = "error"  # or "warning"
    path: str = ""  # field inside a structured file ("reward.events[2].value_key")

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        field = f"{self.path}: " if self.path else ""
        return f"{loc}: {field}expected {self.expected}, found {self.found}"

    def to_dict(self) -> dict:
        return asdict(self)
