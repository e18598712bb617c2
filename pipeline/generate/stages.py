"""The stages of `envforge generate`, declared once, in the order they run.

Each stage is an async function from a theme's context to a `StageReport`; it reads and writes
files of the theme's work folder only, and raises `Rejected` when the theme cannot go on. The run
loop, `--pause-after`, `envforge review retry --from`, the review catalogue's stage order and the
columns of the paper's Table 2 are all read from `STAGES` — a new stage is one entry here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from envforge.pipeline import layout
from envforge.pipeline.generate import code, design, dsl, repair, verify_stage
from envforge.pipeline.generate.context import StageReport, ThemeContext
from envforge.pipeline.verify.stages import EXECUTION, LEVEL_GENERATION, RELIABILITY, VERIFY_STAGES

# Table 2 of the paper's columns, in its order, are verify's stages' (they declare them); a theme passes a
# column if it was not rejected at or before a stage of that column.
INPUT = "input"  # a theme rejected before any stage runs (too long, a duplicate)
HAND = ("review", "package")  # where a person's decision, and a finished theme, sort after the stages
# How a stage a budget cap stopped ended (a stage attempt's exit status in the run database):
# the theme's own cap (--theme-budget-usd), or the run's (--budget-usd; `--resume` goes on from it).
THEME_BUDGET, RUN_BUDGET = "budget", "run_budget"


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[ThemeContext], Awaitable[StageReport]]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    needs_model: bool  # the generation model; verification's own models are optional settings
    column: str = EXECUTION  # the Table 2 column a rejection here counts against
    checks: tuple[tuple[str, str], ...] = ()  # named rejection points inside the stage, with their column
    pausable: bool = False  # supervised mode may stop after it for a person to edit its files
    # re-checks what a person edited in a pause: what is wrong with it (the person's to fix), or None
    after_edit: Callable[[ThemeContext], str | None] | None = None


AGENT_OUTPUT = layout.AGENT_FILES + (layout.TRAJECTORY,)
STAGES: tuple[Stage, ...] = (
    Stage("design", design.run, reads=(layout.THEME_FILE,), writes=(layout.DESIGN,), needs_model=True,
          pausable=True),
    Stage("dsl", dsl.run, reads=(layout.THEME_FILE, layout.DESIGN), writes=(layout.CONFIG,), needs_model=True,
          pausable=True, after_edit=dsl.check_edited),
    Stage("code", code.run, reads=(layout.THEME_FILE, layout.DESIGN, layout.CONFIG), writes=AGENT_OUTPUT,
          needs_model=True),
    Stage("repair", repair.run, reads=(layout.THEME_FILE, layout.CONFIG) + layout.AGENT_FILES, writes=AGENT_OUTPUT,
          needs_model=True),
    Stage("verify", verify_stage.run, reads=(layout.CONFIG,) + layout.AGENT_FILES,
          writes=verify_stage.OUTPUTS, needs_model=False,
          checks=tuple((s.name, s.column) for s in VERIFY_STAGES)),
)
NAMES = tuple(s.name for s in STAGES)
PAUSABLE = tuple(s.name for s in STAGES if s.pausable)


def get(name: str) -> Stage:
    return next(s for s in STAGES if s.name == name)


def after(start: str) -> tuple[Stage, ...]:
    """`start` and every stage after it."""
    return STAGES[NAMES.index(start):]


def before(start: str) -> tuple[Stage, ...]:
    return STAGES[:NAMES.index(start)]


def writes_config(stage: str) -> bool:
    """Whether running again from `stage` rewrites config.yaml (else the file must already be valid)."""
    return any(layout.CONFIG in s.writes for s in after(stage))


def table2() -> dict[str, tuple[str, ...]]:
    """Each Table 2 column and the rejection points that fail it, in column order."""
    columns: dict[str, tuple[str, ...]] = {EXECUTION: (INPUT,), LEVEL_GENERATION: (), RELIABILITY: ()}
    for stage in STAGES:
        for point, column in ((stage.name, stage.column), *stage.checks):
            if point not in columns[column]:
                columns[column] += (point,)
    return columns


def table2_counts(finished: list[tuple[bool, str]]) -> dict[str, dict]:
    """Of the themes that finished — (accepted?, the stage a rejected one stopped at) — how many
    passed each column and how many stopped in it. An unfinished theme or one in error is no row."""
    failed_at: set[str] = set()
    columns = {}
    for column, points in table2().items():
        failed_at |= set(points)
        columns[column] = {"passed": sum(ok or stage not in failed_at for ok, stage in finished),
                           "stopped_here": sum(not ok and stage in points for ok, stage in finished)}
    return columns


def catalogue_order() -> tuple[str, ...]:
    """Every place a theme can stop, in pipeline order: how `envforge review` sorts by stage."""
    order = [INPUT]
    for stage in STAGES:
        order += [p for p in (stage.name, *(c for c, _ in stage.checks)) if p not in order]
    return tuple(order) + HAND
