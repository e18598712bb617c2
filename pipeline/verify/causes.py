"""Why verification rejected an environment, as values a caller decides on (`Rejected.cause`).

A stage returns its rejection as a `StageRejection` (pipeline/verify/stages.py): a rejection's `reason`
is for a person; its cause is for code, one typed shape per failure mode with the figures a
program decides on (the shapes are pipeline.kinds' `RejectionCause` kinds, so verification.json
records the cause as {"kind": ..., fields} and reads it back as its shape). A decision that depends
on why a stage rejected (the levels stage blaming the validator rather than the generator, review's
advice on a reliability rejection) reads the cause, never the wording of the reason.

Raised where (every `raise Rejected` of verify carries one):
  context     UnreadableFolder, EnvDoesNotLoad
  execution   EnvCrashed, EmptyObservation, EndConditionIgnored; WorkerFailed (outcome.settle)
  levels      GeneratorCrashed, ValidatorCrashed, SafetyStop, GeneratorIgnoresSeed, ValidatorRejectsAll,
              TooFewLevels, ValidatorAcceptsUnsolvable, BadGeneratedLevel, ShippedLevelRefused,
              UnfitLevel, ValTestOverlap, GeneratorAndShippedLevelsFail (both, each with its cause),
              EnvCrashed (certify.py, chance); WitnessNotReplayed (levelmax.py)
  reliability EnvCrashed, NoScorableLevels, DoingNothingScoresMax, DegeneratePolicy, InvalidPlayPays,
              PlannerScoresNothing, NoBetterThanRandom
  models      ReactRolloutFailed, ModelsNotSeparated
"""
from __future__ import annotations

from dataclasses import dataclass

from envforge.pipeline.kinds import (
    BadGeneratedLevel,
    DegeneratePolicy,
    DoingNothingScoresMax,
    EmptyObservation,
    EndConditionIgnored,
    EnvCrashed,
    EnvDoesNotLoad,
    GeneratorAndShippedLevelsFail,
    GeneratorCrashed,
    GeneratorIgnoresSeed,
    InvalidPlayPays,
    ModelsNotSeparated,
    NoBetterThanRandom,
    NoScorableLevels,
    PlannerScoresNothing,
    ReactRolloutFailed,
    RejectionCause,
    SafetyStop,
    ShippedLevelRefused,
    TooFewLevels,
    UnfitLevel,
    UnreadableFolder,
    ValidatorAcceptsUnsolvable,
    ValidatorCrashed,
    ValidatorRejectsAll,
    ValTestOverlap,
    WitnessNotReplayed,
    WorkerFailed,
)

__all__ = [
    "BadGeneratedLevel", "DegeneratePolicy", "DoingNothingScoresMax", "EmptyObservation", "EndConditionIgnored",
    "EnvCrashed", "EnvDoesNotLoad", "GeneratorAndShippedLevelsFail", "GeneratorCrashed", "GeneratorIgnoresSeed",
    "InvalidPlayPays", "ModelsNotSeparated", "NoBetterThanRandom", "NoScorableLevels", "PlannerScoresNothing",
    "ReactRolloutFailed",
    "RejectionCause", "SafetyStop", "ShippedLevelRefused", "StageRejection", "TooFewLevels", "UnfitLevel",
    "UnreadableFolder", "ValTestOverlap", "ValidatorAcceptsUnsolvable", "ValidatorCrashed", "ValidatorRejectsAll",
    "WitnessNotReplayed", "WorkerFailed", "crashed",
]


@dataclass(frozen=True)
class StageRejection:
    """Why a stage rejected (not rejection.json's record, pipeline.kinds.Rejection): `reason` for a
    person, `cause` for code (every rejection of verify has one: tests/test_verify_causes.py holds
    each `raise Rejected` to it)."""

    reason: str
    cause: RejectionCause | None


def crashed(failure, default_where: str, activity: str, level: object = "", step: int | None = None,
            action: str | None = None) -> EnvCrashed:
    """The cause of a rejection for a sandbox failure (pipeline.sandbox.SandboxFailure) of the
    environment while envforge was `activity` on `level`."""
    return EnvCrashed(failure.kind, failure.where or default_where, activity, str(level or ""), step, action,
                      None if step is not None else (getattr(failure, "op", None) or None))
