"""Verify an environment folder: the library call under `envforge verify`.

The model-free stages (execution, levels, reliability: pipeline/verify/) run in the sandbox; given
models, the model-driven forms follow (pipeline/verify/models.py, which generate uses too): a
short ReAct rollout (`model`) and the differential test of a weaker against a stronger model
(`agent_models`). The verdict and figures go to the folder's verification.json when written.

    job = VerifyJob(env_dir, VerifyOptions(stages="execution"))
    result = job.run()          # job.clients(): the model clients it made, for their costs
"""
from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Callable

from envforge.pipeline import layout, manifest
from envforge.pipeline import records as files
from envforge.pipeline.api.options import ExecutorOptions, LLMOptions, Options, group, option
from envforge.pipeline.api.values import COUNT, SECONDS, SEED, number, out_file
from envforge.pipeline.errors import UserError, not_a_folder
from envforge.pipeline.llm.config import PROVIDERS
from envforge.pipeline.sandbox.outside.executor import running_on
from envforge.pipeline.verify import STAGES, VerificationResult, VerifyRunOptions, verify_env
from envforge.pipeline.verify.models import ModelChecks, verify_with_models

_STAGE_DEFAULTS = VerifyRunOptions()
MODEL_CHECKS = "model-driven checks (after the model-free stages; need a provider)"


@dataclasses.dataclass(frozen=True)
class VerifyOptions(Options):
    stages: str = option(",".join(STAGES), help="comma-separated stages to run, in order (default {default})")
    write: bool = option(False, help="write verification.json, manifest.json and level_max_rewards.json into the "
                         "folder (default only for folders envforge generate made: any other folder is judged, "
                         "not changed)")
    out: str | None = option(None, out_file, metavar="FILE",
                             help="also write the verdict and figures (the --json document) to FILE")
    write_levels: bool = option(False, help="replace levels/ and val_levels/ by the generated set (implies --write; "
                                "default: verify it in the sandbox only and keep the folder's levels)")
    margin: float = option(_STAGE_DEFAULTS.margin, number(0.0, 1.0),
                           help="reliability: reject when the random agent's mean normalized reward is >= the "
                                "planner's minus this (default {default})")
    search_nodes: int = option(_STAGE_DEFAULTS.search_nodes, COUNT,
                               help="search budget per level, in nodes (environment steps) over all its search "
                                    "passes: the same maxima and verdicts on an idle and a busy machine (default "
                                    "{default})")
    search_seconds: float = option(_STAGE_DEFAULTS.search_seconds, SECONDS,
                                   help="wall-clock safety stop of one search, not a budget: a level it cuts is "
                                        "labelled in the result, since its figures then depend on machine load "
                                        "(default {default})")
    random_episodes: int = option(_STAGE_DEFAULTS.random_episodes, COUNT,
                                  help="random-agent episodes per level (default {default})")
    profile_nodes: int = option(_STAGE_DEFAULTS.profile_nodes, COUNT,
                                help="breadth-first search budget per level, in nodes, for its difficulty profile "
                                     "(shortest witness, nodes to the max, branching; default {default})")
    call_seconds: float = option(_STAGE_DEFAULTS.limits.call_seconds, SECONDS,
                                 help="wall-clock limit of one call of the environment's code (its load, a reset, a "
                                      "step); longer is a hang (default {default})")
    generator_seconds: float = option(_STAGE_DEFAULTS.limits.generator_seconds, SECONDS,
                                      help="wall-clock safety stop of one call of the environment's generator or "
                                           "validator, not a call limit (they may search a level's whole space, "
                                           "slower on a busy machine); a call it cuts is named in the verdict as "
                                           "load-dependent (default {default})")
    seed: int = option(_STAGE_DEFAULTS.seed, SEED, help="seed of the random agents (default {default})")
    budget: float = option(_STAGE_DEFAULTS.budget_seconds, SECONDS, metavar="SECONDS",
                           help="wall clock of the model-free stages, a safety stop: past it verify stops with an "
                                "error naming the stage it cut, judging and recording nothing, since where it cuts "
                                "depends on machine load (default {default}). The model-driven checks below are not "
                                "counted: they are bounded by their step and call limits")
    agent_models: str | None = option(None, metavar="WEAK,STRONG", section=MODEL_CHECKS,
                                      help="the differential test: reject when the weaker model's ReAct agent "
                                           "scores at least as high as the stronger's in every run")
    agent_runs: int = option(2, COUNT, metavar="N", section=MODEL_CHECKS, help="runs per model (default {default})")
    agent_levels: int = option(5, COUNT, metavar="N", section=MODEL_CHECKS,
                               help="test levels each model plays (default {default})")
    llm: LLMOptions = group(LLMOptions)
    executor: ExecutorOptions = group(ExecutorOptions)

    def stage_list(self) -> tuple[str, ...]:
        stages = tuple(s.strip() for s in self.stages.split(",") if s.strip())
        unknown = [s for s in stages if s not in STAGES]
        if unknown or not stages:
            raise UserError(f"--stages: expected some of {','.join(STAGES)}, found {self.stages!r}")
        return stages


class VerifyJob:
    """One verification, checked before it runs (UserError for bad input); `run()` runs it."""

    def __init__(self, env_dir: str, options: VerifyOptions, progress: Callable[[str], None] | None = None):
        self.env_dir, self.options = env_dir, options
        self.stages = options.stage_list()
        self.pair = model_pair("--agent-models", options.agent_models)
        self.executor = options.executor.start()
        self.write = options.write or options.write_levels or manifest.made_by_generate(Path(env_dir))
        self.stage_options = VerifyRunOptions(
            margin=options.margin, search_nodes=options.search_nodes, search_seconds=options.search_seconds,
            random_episodes=options.random_episodes, profile_nodes=options.profile_nodes,
            write_levels=options.write_levels, write=self.write,
            seed=options.seed, budget_seconds=options.budget,
            limits=dataclasses.replace(_STAGE_DEFAULTS.limits, call_seconds=options.call_seconds,
                                       generator_seconds=options.generator_seconds), progress=progress)
        self.checks: ModelChecks | None = None
        _require_env_folder(env_dir)

    def clients(self) -> list:
        """The model clients made so far (their cost summaries are the caller's to show)."""
        return self.checks.clients() if self.checks else []

    def run(self) -> VerificationResult:
        with running_on(self.executor):
            result = verify_env(self.env_dir, self.stages, self.stage_options)
            llm = self.options.llm
            if result.accepted and (llm.model or self.pair):
                self.checks = model_checks(llm, llm.model, self.pair, self.options.agent_runs,
                                           self.options.agent_levels)
                asyncio.run(_verify_with_models(self.env_dir, self.checks, result, self.write))
        if self.options.out:
            write_report(Path(self.options.out), result)
        return result


def _require_env_folder(path: str) -> None:
    """A path that holds no environment at all is a usage error (exit 2), not a rejection, and
    nothing is written into it; a folder missing only some files is an environment with a flaw."""
    env = layout.EnvDir.at(path)
    if not env.path.is_dir():
        raise UserError(f"{path}: expected an environment folder, found {not_a_folder(env.path)}")
    if len(env.missing_required()) == len(layout.REQUIRED_FILES):
        raise UserError(
            f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}), found neither file"
        )


def model_pair(flag: str, value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    pair = tuple(s.strip() for s in value.split(","))
    if len(pair) != 2 or not all(pair):
        raise UserError(f"{flag}: expected WEAK,STRONG (two model specs), found {value!r}")
    return pair


def model_checks(llm: LLMOptions, rollout: str | None, pair: tuple[str, str] | None, runs: int,
                 levels: int) -> ModelChecks:
    """Clients for the model-driven forms, from the call's provider options (a UserError when a
    provider is not configured, before any work)."""
    def client(spec: str):
        # Replayed generation may be verified by live models: a spec naming its provider ("openai/x")
        # then uses it. (Under a live --provider a slashed name is that provider's, as on OpenRouter.)
        named = llm.provider == "replay" and "/" in spec and spec.split("/", 1)[0] in PROVIDERS
        return dataclasses.replace(llm, model=spec, **({"provider": None, "replay": None} if named else {})).client()

    weak, strong = (client(pair[0]), client(pair[1])) if pair else (None, None)
    first = strong if pair and rollout == pair[1] else (client(rollout) if rollout else None)
    return ModelChecks(rollout=first, weak=weak, strong=strong, runs=runs, levels=levels)


async def _verify_with_models(env_dir: str, checks: ModelChecks, result, write: bool) -> None:
    try:
        await verify_with_models(env_dir, checks, result, write)
    finally:
        for client in checks.clients():
            await client.aclose()


def write_report(path: Path, report: VerificationResult) -> None:
    try:
        files.write(path, report)
    except OSError as e:
        raise UserError(f"--out: expected a file envforge can write, found {e.strerror}: {path}") from None
