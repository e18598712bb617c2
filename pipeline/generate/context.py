"""What every generation stage gets: the theme, its work folder, the model, the options."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.generate.journal import JournaledClient
from pipeline.generate.themes import Theme

@dataclass(frozen=True)
class Options:
    levels: int = 15  # verified levels per environment: two thirds test, one third validation
    seed: int = 0
    pause_after: str | None = None  # "design" or "dsl": supervised mode
    dsl_corrections: int = 3  # model rewrites of a DSL document the checker rejects
    code_steps: int = 30  # model calls to write the files
    repair_steps: int = 40  # model calls to make `check` pass (paper: up to 40)
    verify_search_seconds: float = 20.0
    model: str = ""


class Rejected(Exception):
    """The theme cannot go on: the stage it failed at and why, in words a person can act on."""

    def __init__(self, stage: str, reason: str, details: dict | None = None):
        super().__init__(reason)
        self.stage, self.reason, self.details = stage, reason, details or {}


@dataclass
class ThemeContext:
    theme: Theme
    work: Path
    llm: JournaledClient
    options: Options

    def read(self, name: str) -> str:
        return (self.work / name).read_text(encoding="utf-8")

    def write(self, name: str, text: str) -> None:
        target = self.work / name
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
