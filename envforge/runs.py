"""Long-running envforge jobs from Python: evaluate agents, generate environments, read results.

Each has an async form (`await envforge.evaluate_async(...)`) and a sync form that also works
inside a running event loop (a notebook). Both go through the same code as the command line,
with the same options and defaults, so a Python call and an `envforge` command give the same
files and the same numbers.
"""
from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from envforge._loop import run_sync
from envforge.pipeline.api.environment import Environment
from envforge.pipeline.errors import UserError, not_a_folder
from envforge.pipeline.evaluate.records import Records
from envforge.pipeline.kinds import EpisodeRecord


def _in_keywords(options: str):
    """A UserError the call raises names its options as the call's keywords (`out=runs/x`), not as
    the command's flags (`--out runs/x`): Options.in_keywords of the options class at `options`."""
    def say(error: UserError) -> None:
        module, _, name = options.rpartition(".")
        said = getattr(importlib.import_module(module), name).in_keywords(str(error))
        error.args = (said, *error.args[1:])

    def wrap(call):
        if inspect.iscoroutinefunction(call):
            @functools.wraps(call)
            async def called_async(*args, **keywords):
                try:
                    return await call(*args, **keywords)
                except UserError as e:
                    say(e)
                    raise
            return called_async

        @functools.wraps(call)
        def called(*args, **keywords):
            try:
                return call(*args, **keywords)
            except UserError as e:
                say(e)
                raise
        return called
    return wrap


@_in_keywords("envforge.pipeline.api.evaluate.EvaluateOptions")
async def evaluate_async(envs: str | Path | Iterable[str | Path], agent: str | None = None, *,
                         out: str | Path | None = None, **options: Any):
    """Score `agent` ("react", "tools", "random", "planner", learned:PATH, MODULE:ATTR) on the
    environment folders `envs` (or folders holding them), as `envforge evaluate` does, with its
    defaults: what is not given here is the command's default (agent react, 3 runs per level, the
    test split, records in ./evaluation). `options` are evaluate's other flags (max_levels=2,
    runs=1, concurrency=4, model="anthropic/…", skin=…, resume=True, executor="ray"). Returns an
    Evaluation: `.envs`, `.overall`, `.episodes` (EpisodeRecord objects), `.out`."""
    from envforge.pipeline.api.evaluate import EvaluateOptions
    from envforge.pipeline.api.evaluate import evaluate as evaluate_envs

    paths = [str(envs)] if isinstance(envs, (str, Path)) else [str(e) for e in envs]
    chosen = EvaluateOptions.from_keywords("envforge.evaluate", agent=agent, out=out, **options)
    return await evaluate_envs(paths, chosen)


def evaluate(envs, agent: str | None = None, **options: Any):
    """The sync form of evaluate_async (works inside a running event loop too)."""
    return run_sync(evaluate_async(envs, agent, **options))


@dataclass
class Generation:
    """A generation run: accepted environments (opened) and the run's summary."""

    out: Path
    summary: dict

    @property
    def accepted(self) -> list[Environment]:
        return [Environment(self.out / name) for name in self.summary["accepted"]]

    @property
    def rejected(self) -> dict[str, dict]:
        """name -> {"stage", "reason"}"""
        return self.summary["rejected"]

    @property
    def errors(self) -> dict[str, dict]:
        """name -> {"stage", "reason"}: themes that ended in an error (an infrastructure fault, not a
        verdict on the environment); neither accepted nor rejected, and left out of Table 2."""
        return self.summary["errors"]


@_in_keywords("envforge.pipeline.api.generate.GenerateOptions")
async def generate_async(themes: str | Path, out: str | Path, **options: Any) -> Generation:
    """Turn a themes file into environments under `out`, as `envforge generate` does. `options`
    are generate's flags: provider="replay" (the offline demo), model=…, levels=15, seed=0,
    concurrency=2, resume=True, budget_usd=…"""
    from envforge.pipeline.api.generate import GenerateOptions
    from envforge.pipeline.api.generate import generate as generate_envs

    chosen = GenerateOptions.from_keywords("envforge.generate", themes=themes, out=out, **options)
    root, summary = await generate_envs(chosen)
    return Generation(root, summary)


def generate(themes: str | Path, out: str | Path, **options: Any) -> Generation:
    """The sync form of generate_async (works inside a running event loop too)."""
    return run_sync(generate_async(themes, out, **options))


def episodes(out: str | Path) -> list[EpisodeRecord]:
    """The episode records an evaluation wrote to `out` (the latest record of each episode)."""
    folder = Path(out)
    if not folder.is_dir():
        raise UserError(f"{out}: expected an evaluation output folder, found {not_a_folder(folder)}")
    return Records(folder).all()


@_in_keywords("envforge.pipeline.api.verify.VerifyOptions")
def verify(env_dir: str | Path, **options: Any):
    """Verify the environment folder `env_dir` as `envforge verify` does, with its defaults.
    `options` are verify's flags (stages="execution,levels", write=True, search_nodes=…, seed=…,
    agent_models="WEAK,STRONG" with model=…). Returns the VerificationResult: `.accepted`,
    `.stage`, `.reason`, `.stages` (each stage's figures). Works inside a running event loop."""
    import asyncio

    from envforge.pipeline.api.verify import VerifyJob, VerifyOptions

    job = VerifyJob(str(env_dir), VerifyOptions.from_keywords("envforge.verify", **options))
    return run_sync(asyncio.to_thread(job.run))  # its model checks run an event loop of their own


@_in_keywords("envforge.pipeline.api.check.CheckOptions")
def check(env_dir: str | Path, **options: Any):
    """The basic code test of `env_dir` in the sandbox, as `envforge check` does (seed=…, budget=…).
    Returns the CheckReport: `.ok`, `.problems`, `.stats`."""
    from envforge.pipeline.api.check import CheckOptions
    from envforge.pipeline.api.check import check as check_env

    return check_env(str(env_dir), CheckOptions.from_keywords("envforge.check", **options))


@_in_keywords("envforge.pipeline.api.probe.ProbeOptions")
def probe(env_dir: str | Path, **options: Any):
    """World-model test items from the environment at `env_dir`, as `envforge probe` does (kind=
    "predict,plan", n=50, seed=0, out=FILE, skin=…, max_k=…, choices=…, samples=…). Returns the
    Probes: `.out` (the JSONL written), `.items`, `.dropped`, `.summary` (per kind)."""
    from envforge.pipeline.api.probe import ProbeOptions
    from envforge.pipeline.api.probe import probe as make_probes

    return make_probes(str(env_dir), ProbeOptions.from_keywords("envforge.probe", **options))


@_in_keywords("envforge.pipeline.api.reskin.ReskinOptions")
def reskin(env_dir: str | Path, **options: Any):
    """A skin for the environment at `env_dir`, as `envforge reskin` does (style="json"|"narrative"|
    "inverse" from templates, or any other style written by the model with model=…; check=NAME
    checks an existing one again). Returns the Reskinned: `.name`, `.file`, `.report.ok`."""
    from envforge.pipeline.api.reskin import ReskinJob, ReskinOptions

    job = ReskinJob(str(env_dir), ReskinOptions.from_keywords("envforge.reskin", **options))
    if not job.needs_model:
        return job.run()

    async def with_model():
        async with job.options.llm.client() as client:
            return await job.run_with_model(client)

    return run_sync(with_model())
