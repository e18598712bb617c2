"""The model-driven forms of verification (AutoEnv §3.2), run after the model-free stages
whenever models are configured for them: `envforge verify --model/--agent-models`, and
`envforge generate --verify-models` (or $ENVFORGE_VERIFY_MODELS) in its verify stage. Both reuse `envforge
evaluate`'s ReAct agent and episode loop,
so the environment's code stays in the sandbox and the model's key stays in this process.

* execution (`--model SPEC`): a short ReAct rollout on the first test level; the environment must
  run a real agent's actions without failing. An `env_error` stop rejects; a model that cannot be
  reached is reported, not blamed on the environment.
* reliability (`--agent-models WEAK,STRONG`): the paper's differential test. Each model plays the
  first `levels` test levels `runs` times; the environment is rejected when the weaker model's mean
  normalized reward is at least the stronger one's in every run — the reward does not tell them apart.
A model that cannot be reached ends the command with an error and leaves the model-free verdict as it was.
"""
from __future__ import annotations

import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import Rejected, UserError
from envforge.pipeline.evaluate import Limits, make_player
from envforge.pipeline.evaluate.records import Records
from envforge.pipeline.evaluate.runner import RunOptions, evaluate
from envforge.pipeline.kinds import DifferentialFigures, ReactFigures
from envforge.pipeline.verify import record
from envforge.pipeline.verify.causes import ModelsNotSeparated, ReactRolloutFailed

ROLLOUT_STEPS = 10
UNREACHABLE = ("model_error", "budget")


@dataclass
class ModelChecks:
    """The model-driven forms to run: a ReAct rollout with `rollout`'s model, and the differential
    test of `weak` against `strong` (each an LLMClient, or None to skip that form)."""

    rollout: object | None = None
    weak: object | None = None
    strong: object | None = None
    runs: int = 2  # differential: runs per model
    levels: int = 5  # differential: test levels each model plays

    def clients(self) -> list:
        unique = []
        for client in (self.rollout, self.weak, self.strong):
            if client is not None and all(client is not c for c in unique):
                unique.append(client)
        return unique


async def verify_with_models(env_dir: str | Path, checks: ModelChecks, result, write: bool = True) -> None:
    """Run the configured model-driven forms on an environment the model-free stages accepted; a
    rejection updates `result` (a VerificationResult), which is recorded in the folder again when
    `write` (as the model-free stages were)."""
    stage = "execution"
    try:
        if checks.rollout is not None:
            result.stages.execution_react = await react_rollout(Path(env_dir), checks.rollout)
        stage = "reliability"
        if checks.weak is not None and checks.strong is not None:
            result.stages.reliability_models = await differential(Path(env_dir), checks.weak, checks.strong,
                                                                     checks.runs, checks.levels)
    except Rejected as rejection:
        result.accepted, result.stage, result.reason, result.cause = False, stage, rejection.reason, rejection.cause
    if write:
        record(Path(env_dir), result)


async def _play(env_dir: Path, client, runs: int, levels: int, limits: Limits) -> list:
    target = EnvSpec.open(env_dir)
    options = RunOptions("react", client.spec, runs=runs, split="test", max_levels=levels, concurrency=4,
                         limits=limits)
    with tempfile.TemporaryDirectory(prefix="envforge-verify-") as out:
        outcome = await evaluate([target], make_player("react", client=client), options, Records(out))
    return outcome.finished


async def react_rollout(env_dir: Path, client) -> ReactFigures:
    [record] = await _play(env_dir, client, runs=1, levels=1, limits=Limits(max_steps=ROLLOUT_STEPS)) or [None]
    if record is None:
        return ReactFigures(client.spec, False, note="no test level to play")
    figures = ReactFigures(client.spec, record.stop_reason not in UNREACHABLE, record.level, record.steps,
                           record.stop_reason, record.total_reward, record.format_errors)
    if record.stop_reason == "env_error":
        raise Rejected(f"expected the environment to run a ReAct agent's actions ({client.spec}), found it failing "
                       f"on {record.level} after {record.steps} step(s): {record.stop_detail or 'env_error'}",
                       cause=ReactRolloutFailed(client.spec, str(record.level), record.steps,
                                                str(record.stop_detail or "env_error")[:500]))
    return figures


async def differential(env_dir: Path, weak, strong, runs: int, levels: int) -> DifferentialFigures:
    means: dict[str, dict[int, float]] = {}
    for client in (weak, strong):
        per_run: dict[int, list[float]] = defaultdict(list)
        for episode in await _play(env_dir, client, runs, levels, Limits()):
            if episode.stop_reason in UNREACHABLE:  # the provider's fault, not the environment's
                raise UserError(f"the differential test could not run: {client.spec} stopped with "
                                f"{episode.stop_reason}: {episode.stop_detail}")
            if episode.normalized is not None:
                per_run[episode.run].append(episode.normalized)
        if not per_run:
            raise UserError(f"the differential test could not score {client.spec}: no test level has a certified "
                            f"max reward (run `envforge verify` without models first)")
        means[client.spec] = {run: statistics.fmean(scores) for run, scores in sorted(per_run.items())}
    weak_runs, strong_runs = means[weak.spec], means[strong.spec]
    figures = DifferentialFigures(
        weak.spec, strong.spec, runs, levels, round(statistics.fmean(weak_runs.values()), 4),
        round(statistics.fmean(strong_runs.values()), 4),
        {str(r): {"weak": round(weak_runs.get(r, 0.0), 4), "strong": round(strong_runs.get(r, 0.0), 4)}
         for r in sorted(set(weak_runs) | set(strong_runs))})
    if all(weak_runs.get(r, 0.0) >= strong_runs.get(r, 0.0) for r in strong_runs):
        raise Rejected(f"expected the stronger model ({strong.spec}) to score higher than the weaker ({weak.spec}) "
                       f"in some run, found {figures.strong_normalized} vs {figures.weak_normalized} with the "
                       f"weaker at least as high in all {runs} run(s): the reward does not measure skill",
                       cause=ModelsNotSeparated(weak.spec, strong.spec, figures.weak_normalized,
                                                figures.strong_normalized, runs))
    return figures
