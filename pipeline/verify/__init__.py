"""`envforge verify`: the model-free verification of an environment folder (AutoEnv §3.2, Alg. 1).

Three stages, in order (declared in stages.py), each a module here; the first that rejects decides
the verdict, its cause typed (causes.py). Every flaw is still named: when the levels stage rejects
(its generator, or the env's validator) yet levels a replayed witness scores on remain, reliability
runs its controls on those, and what it finds joins the reason ("; also found: reliability, on the
N level(s) that can be played: ..."). The wall-clock `--budget` is a safety stop, not a verdict: a
run it cuts ends with `BudgetRanOut` (an infrastructure error naming the stage), records nothing,
and a rejection found after it ran out is not recorded either (a refused call may be its cause):
  1 execution   (execution.py)   random and planner rollouts on every level run cleanly;
  2 levels      (levels.py)      the generator makes 10 + 5 distinct levels the validator accepts,
                                 and every level gets a certified max reward (certify.py: validator
                                 bound and search with a replayed witness);
  3 reliability (reliability.py) the search planner outscores a random agent by a margin.

What it writes into the folder:
  * verification.json — always: {accepted, stage, reason, cause: the rejecting stage's typed cause
    ({"kind": ..., fields}, causes.py; null when accepted), stages: {stage: figures}, options: the
    VerifyRunOptions it ran with};
  * level_max_rewards.json — for the levels in the folder: the shipped ones, or, with
    `write_levels`, the generated set, which then replaces levels/ and val_levels/ (the
    generate pipeline asks for that). Without `write_levels`, the generated set is
    verified in the worker and discarded, and shipped levels are never rewritten. A folder
    with no levels and no `write_levels` gets no level_max_rewards.json;
  * manifest.json — its `verification` summary and the random agent's normalized score per
    level (`difficulty_baseline`), and the refreshed hashes of the files verify wrote.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from envforge.pipeline import layout, manifest
from envforge.pipeline import records as files
from envforge.pipeline.errors import Rejected
from envforge.pipeline.kinds import (
    DifficultyBaseline,
    StageFigures,
    Verification,
    VerificationResult,
    VerificationSummary,
    VerifyFigures,
)
from envforge.pipeline.sandbox.outside.capabilities import ran_as, ran_under
from envforge.pipeline.verify import reliability
from envforge.pipeline.verify.context import BudgetRanOut, Clock, Context, VerifyRunOptions
from envforge.pipeline.verify.stages import STAGES, VERIFY_STAGES, VerifyStage
from envforge.pipeline.verify.stages import get as get_stage

__all__ = ["STAGES", "VERIFY_STAGES", "BudgetRanOut", "VerifyRunOptions", "VerificationResult", "record", "verify_env"]


def verify_env(
    env_dir: str | Path, stages: tuple[str, ...] = STAGES, options: VerifyRunOptions | None = None
) -> VerificationResult:
    options = options or VerifyRunOptions()
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; expected some of {list(STAGES)}")
    result = VerificationResult(True, env_dir=str(Path(env_dir).resolve()), options=options.recorded())
    clock = Clock()
    try:
        ctx = Context.open(env_dir, options)
    except Rejected as rejection:  # no playable folder: nothing ran
        ctx, result.accepted, result.stage, result.reason = None, False, VERIFY_STAGES[0].name, rejection.reason
        result.cause = rejection.cause
    scored = None
    for stage in _plan(stages) if ctx is not None else ():
        if stage.name in stages:
            options.say(f"{stage.name}... ({clock.wall_seconds():.0f}s so far)")
        outcome = stage.run(ctx, scored)
        setattr(result.stages, stage.name, outcome.figures)
        if outcome.rejection is not None:
            result.accepted, result.stage, result.reason = False, stage.name, outcome.rejection.reason
            result.cause = outcome.rejection.cause
            result.reason += _later_findings(ctx, stage, stages, outcome.levels, result, clock)
            break
        scored = outcome.levels
    result.stages.total = clock.stamp(StageFigures())
    if not result.accepted and ctx is not None and ctx.over_budget():
        # A call the budget refused may be what rejected: a safety stop, never recorded as a verdict.
        options.say(f"stopped at {result.stage}: the --budget of {options.budget_seconds:g}s ran out")
        raise BudgetRanOut(options.budget_seconds, result.stage, result.stages.total.wall_seconds)
    result.confinement, result.runs_as = ran_under(), ran_as()
    if not result.reason:
        result.reason = "accepted: " + ", ".join(s for s in STAGES if s in stages) + " passed"
        result.reason += _accepted_notes(result.stages)
    took = f"after {result.stages.total.wall_seconds:.0f}s"
    options.say(f"model-free stages passed {took}" if result.accepted else f"rejected at {result.stage} {took}")
    if options.write:
        record(Path(env_dir), result)
    return result


def _later_findings(ctx: Context, rejecting: VerifyStage, asked: tuple[str, ...], playable, result: VerificationResult,
                    clock: Clock) -> str:
    """Every flaw named: when a stage rejects but hands on levels that can still be played (levels.py:
    a witness scores on them), the later stages asked for run their controls on those levels, and
    what they find joins the reason (their figures are recorded as well). The verdict's stage and
    cause stay the first rejecting stage's."""
    if not playable:
        return ""
    # Only the controls run: nothing is written (the levels stage wrote every level's max already;
    # reliability correcting a max would rewrite level_max_rewards.json with these levels alone).
    ctx = dataclasses.replace(ctx, options=dataclasses.replace(ctx.options, write=False))
    found = []
    for stage in VERIFY_STAGES[[s.name for s in VERIFY_STAGES].index(rejecting.name) + 1:]:
        if stage.name not in asked or not stage.needs_levels:
            continue
        ctx.options.say(f"{stage.name} on the {len(playable)} level(s) that can be played... "
                        f"({clock.wall_seconds():.0f}s so far)")
        outcome = stage.run(ctx, playable)
        setattr(result.stages, stage.name, outcome.figures)
        if outcome.rejection is not None:
            found.append(f"{stage.name}, on the {len(playable)} level(s) that can be played: "
                         f"{outcome.rejection.reason}")
    return f"; also found: {'; '.join(found)}" if found else ""


def _plan(asked: tuple[str, ...]) -> list[VerifyStage]:
    """The stages to run, in their order: those asked for, and the levels stage before one that
    needs certified levels (reliability alone certifies the levels in the folder first)."""
    plan: list[VerifyStage] = []
    for stage in VERIFY_STAGES:
        if stage.name in asked:
            if stage.needs_levels and not any(s.name == "levels" for s in plan):
                plan.append(get_stage("levels"))
            plan.append(stage)
    return plan


def _accepted_notes(stages: VerifyFigures) -> str:
    """What an acceptance rests on: the reliability figures (or why they could not decide), how many
    max rewards are lower bounds, and the warnings of the stages."""
    rel, levels, notes = stages.reliability, stages.levels, []
    if rel and rel.inconclusive:
        notes.append(f"reliability inconclusive: {rel.inconclusive}")
    elif rel and rel.planner_normalized is not None and rel.random_normalized is not None:
        notes.append(f"reliability: planner {rel.planner_normalized:.3f} vs random {rel.random_normalized:.3f} "
                     f"of the max")
    if levels and levels.lower_bounds:
        notes.append(f"{len(levels.lower_bounds)} max reward(s) are lower bounds (the search was not exhaustive)"
                     + levels.bounds())
    unknown = rel.unscored_levels if rel else levels.unknown_maxima if levels else None
    if unknown:
        notes.append(f"{len(unknown)} level(s) with an unknown or zero max reward, left out of normalized scores: "
                     + ", ".join(f"{k} ({v})" for k, v in list(unknown.items())[:8])
                     + (", ..." if len(unknown) > 8 else ""))
    if rel and rel.trivial_levels:
        notes.append(f"{len(rel.trivial_levels)} trivial level(s): " + ", ".join(
            f"{k} ({v})" for k, v in list(rel.trivial_levels.items())[:5]) + (", ..." if len(rel.trivial_levels) > 5
                                                                              else ""))
    notes += [w for stage in (stages.execution, levels, rel) if stage for w in stage.warnings or []]
    return f" ({'; '.join(notes)})" if notes else ""


def record(env_dir: Path, result: VerificationResult) -> None:
    """Write verification.json and the manifest's verification summary and difficulty baseline."""
    if not env_dir.is_dir():
        return
    written = Verification(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)},
                           verified_at=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    files.write(env_dir / layout.VERIFICATION, written)

    rel = result.stages.reliability
    baseline = DifficultyBaseline(
        reliability.RANDOM_AGENT, rel.random_episodes_per_level,
        {k: v.random_normalized for k, v in rel.per_level.items() if v.random_normalized is not None},
        rel.random_normalized) if rel and rel.per_level else None
    manifest.verified(env_dir, VerificationSummary(result.accepted, result.stage, result.reason, written.verified_at,
                                                   result.confinement, result.runs_as), baseline)
