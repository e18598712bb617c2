"""What every generation stage gets: the theme, its work folder, the model, the options."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from envforge.pipeline import records as files
from envforge.pipeline.generate.journal import JournaledClient
from envforge.pipeline.generate.themes import Theme
from envforge.pipeline.levelmax import SEARCH_NODES
from envforge.pipeline.verify.models import ModelChecks


@dataclass(frozen=True)
class GenerateRunOptions:
    levels: int = 15  # verified levels per environment: two thirds test, one third validation
    seed: int = 0
    pause_after: str | None = None  # a pausable stage (stages.PAUSABLE): supervised mode
    dsl_corrections: int = 3  # model rewrites of a DSL document the checker rejects
    # The coding agent's step budgets: a step is a tool call run (a write, a read, a check, ...), or a
    # reply that runs none; so they bound the model calls and the tool calls alike (agent.py).
    code_steps: int = 30  # steps to write the files
    repair_steps: int = 40  # steps to make `check` pass (paper: up to 40)
    verify_search_nodes: int = SEARCH_NODES  # verify's search budget per level, in nodes (verify's default)
    model: str = ""


@dataclass
class StageReport:
    """What a stage did, as the run database and manifest.json keep it."""

    exit_status: str = "done"  # how it ended, by name: done, finished, accepted, gave_up_after_3, ...
    steps: int | None = None  # steps of an agent's loop (code, repair): tool calls run, replies running none
    figures: dict = field(default_factory=dict)  # what the stage measured (verification's figures)


@dataclass
class ThemeContext:
    theme: Theme
    work: Path
    llm: JournaledClient
    options: GenerateRunOptions
    verifiers: ModelChecks | None = None  # the model-driven verification, when models are configured
    progress: Callable[[str], None] | None = None  # a line on what the current stage is doing
    interrupted: bool = False  # Ctrl-C came while sandboxed work ran: it was waited for and is kept

    async def sandboxed(self, fn: Callable, *args, **kwargs):
        """`fn(*args, **kwargs)`, sandboxed work that cannot be cut short (it ends on its own limits),
        in a thread. When the run is interrupted meanwhile, it is waited for anyway and its result
        returned, with `interrupted` set: the stage ends on what it found, which the run records, so
        `--resume` does not repeat it; the stage starts nothing more (`go_on`)."""
        work = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            self.interrupted = True
            return await work

    def go_on(self) -> None:
        """Where a stage would start more work: stop there if the run was interrupted."""
        if self.interrupted:
            raise asyncio.CancelledError

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)

    def read(self, name: str) -> str:
        return (self.work / name).read_text(encoding="utf-8")

    def write(self, name: str, text: str) -> None:
        files.write_text(self.work / name, text)
