"""The stages of `envforge verify`, declared once, in the order they run (as generate's are in
pipeline/generate/stages.py).

Each stage is `run(ctx, levels) -> StageOutcome` (pipeline/verify/outcome.py): its own typed figures
(pipeline.kinds: ExecutionFigures, LevelsFigures, ReliabilityFigures; also when it rejects: they
are what verification.json shows of a failed stage), its rejection when the environment is unfit
(a reason and a typed cause, pipeline/verify/causes.py), and the levels later stages score on
(with their certified max rewards). A stage that `needs_levels` runs on certified levels: when it
is asked for without the levels stage, the levels stage runs first. A new stage is one entry here
and a field of pipeline.kinds.ModelFreeFigures named after it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from envforge.pipeline.levelmax import LevelMax
from envforge.pipeline.verify import execution, levels, reliability
from envforge.pipeline.verify.context import Context
from envforge.pipeline.verify.outcome import StageOutcome

Run = Callable[[Context, "list[LevelMax] | None"], StageOutcome]

# The columns of the paper's Table 2 (AutoEnv), in its order: verification's three stages, as generate's
# summary counts them (pipeline/generate/stages.py reads them from here).
EXECUTION, LEVEL_GENERATION, RELIABILITY = "execution", "level generation", "reliability"


@dataclass(frozen=True)
class VerifyStage:
    name: str
    run: Run
    what: str  # what it establishes, in a line
    column: str  # the Table 2 column a rejection here counts against
    needs_levels: bool = False


VERIFY_STAGES: tuple[VerifyStage, ...] = (
    VerifyStage("execution", execution.run, "random and planner rollouts on every level run cleanly", EXECUTION),
    VerifyStage("levels", levels.run, "distinct valid levels from the generator, each with a certified max reward",
                LEVEL_GENERATION),
    VerifyStage("reliability", reliability.run, "the search planner outscores the random agent and every "
                "constant-action policy by a margin", RELIABILITY, needs_levels=True),
)
STAGES = tuple(s.name for s in VERIFY_STAGES)


def get(name: str) -> VerifyStage:
    return next(s for s in VERIFY_STAGES if s.name == name)
