"""Themes in, verified environments out: the library call under `envforge generate` and
`envforge.generate()`.

    job = GenerateJob(GenerateOptions(themes="examples/themes.txt", llm=LLMOptions(provider="replay")))
    summary = await job.run()    # {"accepted": [...], "rejected": {...}, "errors": {...}, ...}
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import sys
from pathlib import Path

from envforge.pipeline import paths
from envforge.pipeline import records as files
from envforge.pipeline.api.options import ExecutorOptions, LLMOptions, Options, group, option
from envforge.pipeline.api.values import COUNT, SEED, one_of, out_dir
from envforge.pipeline.api.verify import model_checks
from envforge.pipeline.errors import UserError
from envforge.pipeline.generate import stages
from envforge.pipeline.generate.context import GenerateRunOptions
from envforge.pipeline.generate.interrupt import on_interrupt
from envforge.pipeline.generate.run import Run, check_resume, prepare_output
from envforge.pipeline.generate.rundb import RunDB
from envforge.pipeline.generate.themes import load_themes
from envforge.pipeline.layout import OutputDir
from envforge.pipeline.sandbox.outside.executor import running_on
from envforge.pipeline.verify.models import ModelChecks

VERIFY_MODELS_VAR = "ENVFORGE_VERIFY_MODELS"


@dataclasses.dataclass(frozen=True)
class GenerateOptions(Options):
    themes: str | None = option(None, metavar="FILE", help="one theme per line (blank lines and # comments "
                                "ignored), or a YAML list of themes or of {theme, name, tags, notes}")
    demo: bool = option(False, help="the bundled offline demo: the themes of examples/themes.txt with --provider "
                        "replay (works from any folder, also in an installed envforge)")
    concurrency: int = option(2, COUNT, metavar="N", help="themes in progress at once (default {default})")
    out: str = option(str(paths.GENERATED_ENVS_DIR), out_dir, metavar="DIR",
                      help="output folder (default: generated_envs/)")
    resume: bool = option(False, help="continue the run in --out: finished stages are not redone")
    pause_after: str | None = option(None, one_of(*stages.PAUSABLE),
                                     help="supervised mode: stop every theme after this stage so a person can edit "
                                          "its files")
    levels: int = option(15, COUNT, metavar="N",
                         help="verified levels per environment, 2/3 test and 1/3 validation (default {default})")
    seed: int = option(0, SEED, help="seed of level generation and verification (default {default})")
    verify_models: str | None = option(None, metavar="MODEL|WEAK,STRONG",
                                       help="also verify with models: a short ReAct rollout (with MODEL, or STRONG) "
                                            "and, given two, the differential test of WEAK against STRONG (default: "
                                            f"${VERIFY_MODELS_VAR}; none)")
    llm: LLMOptions = group(LLMOptions)
    executor: ExecutorOptions = group(ExecutorOptions)

    def resolved(self) -> "GenerateOptions":
        """`demo` spelled out (its themes, the replay provider) and checked (UserError)."""
        options = self
        if self.demo:
            options = dataclasses.replace(
                self, themes=self.themes or str(paths.DEMO_THEMES),
                llm=dataclasses.replace(self.llm, provider=self.llm.provider or "replay"))
        if not options.themes:
            raise UserError("expected --themes FILE (or --demo for the bundled offline demo), found neither")
        if options.concurrency < 1:
            raise UserError(f"--concurrency: expected a whole number of at least 1, found {options.concurrency}")
        if options.levels < 3:
            raise UserError(f"--levels: expected at least 3 (two thirds test, one third validation), found "
                            f"{options.levels}")
        return options

    def verification_models(self) -> str | None:
        return self.verify_models or os.environ.get(VERIFY_MODELS_VAR) or None


def verification_models(options: GenerateOptions) -> ModelChecks | None:
    """The model-driven verification's clients, or None: built before any work, so that a model
    that is not configured stops the call at once."""
    value = options.verification_models()
    if not value:
        return None
    specs = [s.strip() for s in value.split(",")]
    if len(specs) not in (1, 2) or not all(specs):
        raise UserError(f"--verify-models: expected MODEL or WEAK,STRONG (model specs), found {value!r}")
    return model_checks(options.llm, specs[-1], specs if len(specs) == 2 else None, runs=2, levels=5)


class GenerateJob:
    """A generation run, checked before anything is written: its themes and model-driven checks.
    The output folder is made only once the provider is configured (`run`): a bad option writes
    nothing."""

    def __init__(self, options: GenerateOptions, resume_hint: str | None = None):
        self.executor = options.executor.start()  # a Ray cluster joined before anything is written
        self.options = options.resolved()
        self.verifiers = verification_models(self.options)
        self.themes = load_themes(self.options.themes)
        self.resume_hint = resume_hint or shlex.join(
            ["envforge", "generate", "--themes", str(self.options.themes), "--out", str(self.options.out), "--resume"])

    def clients(self) -> list:
        """The model-driven verification's clients (their cost summaries are the caller's to show)."""
        return list(self.verifiers.clients()) if self.verifiers else []

    def output(self) -> OutputDir:
        return prepare_output(Path(self.options.out), self.options.resume)

    async def run(self, client, out: OutputDir | None = None) -> dict:
        """Every theme through the stages, `concurrency` at a time, with `client`; the run's summary.
        One process at a time per output folder."""
        out = out or self.output()
        with files.locked(out.root, "generate"), running_on(self.executor):
            return await self._run(client, out)

    async def _run(self, client, out: OutputDir) -> dict:
        options, verifiers, themes = self.options, self.verifiers, self.themes
        stage_options = GenerateRunOptions(levels=options.levels, seed=options.seed, pause_after=options.pause_after,
                                           model=client.spec)
        db = RunDB(out.db)
        if options.resume:
            try:
                check_resume(db, out.root, themes, stage_options, verifiers)
            except UserError:
                db.close()
                raise
        run_id = db.start_run({"command": "generate", **options.flat()})
        job = Run(client, out, stage_options, db, run_id, len(themes), verifiers=verifiers,
                  unserved=_unserved(client, themes))
        slots = asyncio.Semaphore(options.concurrency)

        async def one(theme):
            async with slots:
                return await job.theme(theme, options.resume)

        tasks = [asyncio.ensure_future(one(t)) for t in themes]
        work = asyncio.gather(*tasks)
        interrupted: list[bool] = []
        stopped = False
        try:
            with on_interrupt(work, job.waiting_for, self.resume_hint) as interrupted:
                await work
        except asyncio.CancelledError:
            if not interrupted:
                raise
        except BaseException:
            # What stops the whole run (a full disk, a closed pipe, a lost node) stops every theme:
            # each records its stage as interrupted, so `--resume` goes on from there.
            stopped = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            summary = job.summary()
            summary["interrupted"] = bool(interrupted) or stopped
            status = "interrupted" if interrupted or stopped else "budget exceeded" if job.stopped else "finished"
            with contextlib.suppress(UserError) if stopped else contextlib.nullcontext():
                db.finish_run(run_id, status, summary)  # on a full disk, what the stages wrote is what resumes
            db.close()
            for checker in verifiers.clients() if verifiers else ():
                await checker.aclose()
        return summary


def _unserved(client, themes) -> dict[str, str]:
    """Replay: the themes its recordings do not hold (name -> why), said in one line before any
    theme runs; each ends in an error, not a verdict, without a stage run for it."""
    replayer = getattr(client, "replayer", None)
    if replayer is None:
        return {}
    unserved = {t.name: why for t in themes if not t.problem and (why := replayer.serves(t.name, t.text))}
    if unserved:
        print(f"replay: the recordings in {replayer.root} hold {replayer.recorded()} theme(s), and serve "
              f"{len(themes) - len(unserved)} of these {len(themes)}; the other {len(unserved)} end in an error, "
              f"not a verdict, without a model call (first: {next(iter(unserved))}); record them with a model "
              f"(--record DIR), or pass --replay DIR", file=sys.stderr, flush=True)
    return unserved


async def generate(options: GenerateOptions) -> tuple[Path, dict]:
    """A whole run with a client from `options.llm`: the output folder and the run's summary."""
    job = GenerateJob(options)
    client = job.options.llm.client()
    async with client:
        out = job.output()
        return out.root, await job.run(client, out)
