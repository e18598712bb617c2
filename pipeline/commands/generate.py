"""envforge generate --themes FILE: themes in, verified environments out."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

from pipeline import records as files
from pipeline import paths
from pipeline.commands.verify import model_checks
from pipeline.errors import UserError
from pipeline.generate import stages
from pipeline.generate.context import Options
from pipeline.generate.interrupt import EXIT_INTERRUPTED, on_interrupt, resume_command
from pipeline.generate.rundb import RunDB
from pipeline.generate.run import Run, check_resume, prepare_output, print_summary
from pipeline.generate.themes import load_themes
from pipeline.llm.cli_args import EXIT_BUDGET_EXCEEDED, add_llm_arguments, print_cost_summary, run_with_client
from pipeline.sandbox.outside.executor import add_executor_arguments
from pipeline.argtypes import COUNT, SEED, add_run_arguments

EXIT_ACCEPTED, EXIT_NONE_ACCEPTED, EXIT_ERROR = 0, 1, 2
VERIFY_MODELS_VAR = "ENVFORGE_VERIFY_MODELS"

EPILOG = """exit status: 0 the run finished and accepted at least one environment (or paused as asked);
1 it finished and accepted none; 2 bad input (themes file, output folder, flags), or a theme that
could not be judged (no recording for it, a template missing from the installation): one line each,
and such a theme is not counted in the table; 3 the run budget (--budget-usd) was reached: themes
not started are listed as skipped.
Offline demo (no key): envforge generate --themes examples/themes.txt --provider replay --out runs/demo
(in a checkout), or, from any folder, envforge generate --demo --out runs/demo"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "generate", help="turn themes into verified environments (the main job)",
        description="Each theme goes through design, DSL, code, repair (up to 40 check-driven steps), "
                    "verification (execution, levels, reliability) and lands in OUT/<name>/ or "
                    "OUT/_rejected/<name>/ with the stage and reason.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--themes", metavar="FILE",
                   help="one theme per line (blank lines and # comments ignored), or a YAML list of "
                        "themes or of {theme, name, tags, notes}")
    p.add_argument("--demo", action="store_true",
                   help="the bundled offline demo: the themes of examples/themes.txt with --provider replay "
                        "(works from any folder, also in an installed envforge)")
    add_run_arguments(p, jobs="themes in progress", concurrency=2, out=str(paths.GENERATED_ENVS_DIR),
                      out_help="output folder (default: generated_envs/)",
                      resume_help="continue the run in --out: finished stages are not redone")
    p.add_argument("--pause-after", choices=stages.PAUSABLE,
                   help="supervised mode: stop every theme after this stage so a person can edit its files")
    p.add_argument("--levels", type=COUNT, default=15, metavar="N",
                   help="verified levels per environment, 2/3 test and 1/3 validation (default 15)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of level generation and verification (default 0)")
    p.add_argument("--verify-models", metavar="MODEL|WEAK,STRONG", default=os.environ.get(VERIFY_MODELS_VAR),
                   help="also verify with models: a short ReAct rollout (with MODEL, or STRONG) and, given two, the "
                        f"differential test of WEAK against STRONG (default: ${VERIFY_MODELS_VAR}; none)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.demo:
        args.themes = args.themes or str(paths.DEMO_THEMES)
        args.provider = args.provider or "replay"
    if not args.themes:
        raise UserError("expected --themes FILE (or --demo for the bundled offline demo), found neither")
    if args.concurrency < 1:
        raise UserError(f"--concurrency: expected a whole number of at least 1, found {args.concurrency}")
    if args.levels < 3:
        raise UserError(f"--levels: expected at least 3 (two thirds test, one third validation), found {args.levels}")
    verifiers = verification_models(args)
    themes = load_themes(args.themes)
    # The output folder is made only once the provider is configured: a bad flag writes nothing.
    try:
        return run_with_client(args, lambda client: generate(
            client, themes, prepare_output(Path(args.out), args.resume), args, verifiers))
    finally:
        for client in verifiers.clients() if verifiers else ():
            print_cost_summary(client, file=sys.stderr if args.json else sys.stdout)


def verification_models(args):
    """The model-driven verification's clients, or None: built before any work, so that a model
    that is not configured stops the command at once."""
    if not getattr(args, "verify_models", None):
        return None
    specs = [s.strip() for s in args.verify_models.split(",")]
    if len(specs) not in (1, 2) or not all(specs):
        raise UserError(f"--verify-models: expected MODEL or WEAK,STRONG (model specs), found {args.verify_models!r}")
    return model_checks(args, specs[-1], specs if len(specs) == 2 else None, runs=2, levels=5)


async def generate(client, themes, out, args, verifiers=None) -> int:
    summary = await run_themes(client, themes, out, args, verifiers)
    if summary["interrupted"]:
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary)
    for name, error in summary["errors"].items():
        print(f"envforge generate: {name}: {error['reason']}", file=sys.stderr)
    if summary["stopped"]:
        print(f"envforge generate: {summary['stopped'].removeprefix('not started: ')}", file=sys.stderr)
        return EXIT_BUDGET_EXCEEDED
    if summary["errors"]:
        return EXIT_ERROR
    return EXIT_ACCEPTED if summary["accepted"] or summary["paused"] else EXIT_NONE_ACCEPTED


async def run_themes(client, themes, out, args, verifiers=None) -> dict:
    """Every theme through the stages, `args.concurrency` at a time; the run's summary.
    `verifiers`: the model-driven verification (pipeline.verify.models.ModelChecks), or None.
    One process at a time per output folder."""
    with files.locked(out.root, "generate"):
        return await _run_themes(client, themes, out, args, verifiers)


async def _run_themes(client, themes, out, args, verifiers=None) -> dict:
    options = Options(levels=args.levels, seed=args.seed, pause_after=args.pause_after, model=client.spec)
    db = RunDB(out.db)
    if args.resume:
        try:
            check_resume(db, out.root, themes, options, verifiers)
        except UserError:
            db.close()
            raise
    run_id = db.start_run({k: v for k, v in vars(args).items() if k not in ("func", "argv")})
    job = Run(client, out, options, db, run_id, len(themes), verifiers=verifiers)
    slots = asyncio.Semaphore(args.concurrency)

    async def one(theme):
        async with slots:
            return await job.theme(theme, args.resume)

    work = asyncio.gather(*(one(t) for t in themes))
    interrupted: list[bool] = []
    try:
        resume = resume_command(args) or shlex.join(["envforge", "generate", "--themes", str(args.themes), "--out",
                                                     str(args.out), "--resume"])
        with on_interrupt(work, job.waiting_for, resume) as interrupted:
            await work
    except asyncio.CancelledError:
        if not interrupted:
            raise
    finally:
        summary = job.summary()
        summary["interrupted"] = bool(interrupted)
        db.finish_run(run_id, "interrupted" if interrupted else "budget exceeded" if job.stopped else "finished",
                      summary)
        db.close()
        for checker in verifiers.clients() if verifiers else ():
            await checker.aclose()
    return summary
