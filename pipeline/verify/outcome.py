"""What a verification stage returns (pipeline/verify/stages.py): its own typed figures, the levels
later stages score on, and why it rejected, if it did.

A stage's body fills the figures it made (they are what verification.json shows of a stage, also
of one that rejected) and raises `Rejected` deep inside when the environment is unfit; `settle`
turns that into the stage's `StageOutcome`, times the stage, and names a sandbox failure the stage did
not expect (still the environment's fault). No stage reads another's figures.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

from envforge.pipeline import layout
from envforge.pipeline.errors import Rejected
from envforge.pipeline.kinds import StageFigures
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.verify.causes import StageRejection, WorkerFailed
from envforge.pipeline.verify.context import Clock, failure_text

if TYPE_CHECKING:
    from envforge.pipeline.levelmax import LevelMax

F = TypeVar("F", bound=StageFigures)


@dataclass
class StageOutcome(Generic[F]):
    figures: F
    # what the next stage scores on, with certified max rewards; on a rejection, the levels that can still
    # be played (the later stages' controls still run on them)
    levels: "list[LevelMax] | None" = None
    rejection: StageRejection | None = None  # None: the stage passed


def settle(stage: str, figures: F, body: Callable[[F], "list[LevelMax] | None"]) -> StageOutcome[F]:
    """Run a stage's `body` on its `figures`: its outcome, its wall and CPU seconds in the figures."""
    clock = Clock()
    try:
        levels = body(figures)
    except Rejected as rejected:
        # A rejecting stage may still hand on the levels that can be played (`playable`, levels.py):
        # the later stages' controls run on them and their findings join the reason (verify/__init__.py).
        return StageOutcome(figures, levels=getattr(rejected, "playable", None) or None,
                            rejection=StageRejection(rejected.reason, rejected.cause))
    except SandboxFailure as failure:
        where = failure.where or layout.ENV_MAIN
        return StageOutcome(figures, rejection=StageRejection(
            f"{where}: expected the {stage} stage to run, found {failure_text(failure)}",
            WorkerFailed(failure.kind, where)))
    finally:
        clock.stamp(figures)
    return StageOutcome(figures, levels)
