"""Why verification rejected an environment, as values a caller decides on (`Rejected.cause`).

A stage returns its rejection as a `Rejection` (pipeline/verify/stages.py): a rejection's `reason`
is for a person; its cause is for code. A decision that depends on why a
stage rejected (the levels stage blaming the validator rather than the generator, say) reads the
cause, never the wording of the reason.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ValidatorRejectsAll:
    """The validator refused every distinct level the generator made (`rejected` of them)."""

    rejected: int


@dataclass(frozen=True)
class TooFewLevels:
    """The generator made fewer distinct, valid, fit levels than wanted within its seeds."""

    wanted: int
    kept: int
    duplicates: int
    rejected_by_validator: int
    unfit: int


@dataclass(frozen=True)
class ShippedLevelRefused:
    """The validator refuses a shipped level, and no replayed search witness scores on it."""

    source: str


@dataclass(frozen=True)
class SafetyStop:
    """A call of the generator or validator ran past its wall-clock safety stop (generator_seconds):
    what decided is machine load as much as the environment, and the verdict says so (`detail`)."""

    detail: str


@dataclass(frozen=True)
class WorkerFailed:
    """A sandbox failure the stage did not expect (an environment's fault all the same): its kind
    (pipeline.sandbox.SandboxFailure.kind) and where it happened."""

    kind: str
    where: str


Cause = ValidatorRejectsAll | TooFewLevels | ShippedLevelRefused | SafetyStop | WorkerFailed


@dataclass(frozen=True)
class Rejection:
    """Why a stage rejected: `reason` for a person, `cause` for code (None: no decision depends on it)."""

    reason: str
    cause: Cause | None = None
