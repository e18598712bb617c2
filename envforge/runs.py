"""Long-running envforge jobs from Python: evaluate agents, generate environments, read results.

Each has an async form (`await envforge.evaluate_async(...)`) and a sync form that also works
inside a running event loop (a notebook). Both go through the same code as the command line,
with the same options and defaults, so a Python call and an `envforge` command give the same
files and the same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from pipeline.cli import build_parser
from pipeline.errors import UserError, not_a_folder
from pipeline.evaluate.records import Records
from pipeline.kinds import EpisodeRecord

from envforge._loop import run_sync
from envforge.environment import Environment


def _args(command: str, positional: list[str], options: dict[str, Any]):
    """The parsed arguments of `envforge COMMAND`, from keyword options (max_levels=2 is
    --max-levels 2; True is a bare flag; None and False are left out)."""
    argv = [command, *positional]
    for key, value in options.items():
        if value is None or value is False:
            continue
        argv.append("--" + key.replace("_", "-"))
        if value is not True:
            argv.append(str(value))
    try:
        return build_parser(argv).parse_args(argv)
    except SystemExit:  # argparse printed what was wrong
        raise UserError(f"envforge {command}: expected options of the command line, found {argv[1:]}") from None


async def evaluate_async(envs: str | Path | Iterable[str | Path], agent: str | None = None, *,
                         out: str | Path | None = None, **options: Any):
    """Score `agent` ("react", "tools", "random", "planner", learned:PATH, MODULE:ATTR) on the
    environment folders `envs` (or folders holding them), as `envforge evaluate` does, with its
    defaults: what is not given here is the command's default (agent react, 3 runs per level, the
    test split, records in ./evaluation). `options` are evaluate's other flags (max_levels=2,
    runs=1, concurrency=4, model="anthropic/…", skin=…, resume=True). Returns an Evaluation:
    `.envs`, `.overall`, `.episodes` (EpisodeRecord objects), `.out`."""
    from pipeline.commands import evaluate as command

    paths = [str(envs)] if isinstance(envs, (str, Path)) else [str(e) for e in envs]
    args = _args("evaluate", paths, {"agent": agent, "out": None if out is None else str(out), **options})
    return await command.execute(command.prepare(args))


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


async def generate_async(themes: str | Path, out: str | Path, **options: Any) -> Generation:
    """Turn a themes file into environments under `out`, as `envforge generate` does. `options`
    are generate's flags: provider="replay" (the offline demo), model=…, levels=15, seed=0,
    concurrency=2, resume=True, budget_usd=…"""
    from pipeline.commands.generate import run_themes, verification_models
    from pipeline.generate.run import prepare_output
    from pipeline.generate.themes import load_themes
    from pipeline.llm.cli_args import client_from_args

    args = _args("generate", [], {"themes": str(themes), "out": str(out), **options})
    verifiers = verification_models(args)  # verify_models="WEAK,STRONG": the model-driven verification too
    theme_list = load_themes(args.themes)
    output = prepare_output(Path(args.out), args.resume)
    client = client_from_args(args)
    async with client:
        summary = await run_themes(client, theme_list, output, args, verifiers)
    return Generation(output.root, summary)


def generate(themes: str | Path, out: str | Path, **options: Any) -> Generation:
    """The sync form of generate_async (works inside a running event loop too)."""
    return run_sync(generate_async(themes, out, **options))


def episodes(out: str | Path) -> list[EpisodeRecord]:
    """The episode records an evaluation wrote to `out` (the latest record of each episode)."""
    folder = Path(out)
    if not folder.is_dir():
        raise UserError(f"{out}: expected an evaluation output folder, found {not_a_folder(folder)}")
    return Records(folder).all()
