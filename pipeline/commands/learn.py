"""envforge learn ENV_DIR… [--methods all|NAMES|FILE.yaml | --selection S --signal G --component C]
[--iterations 10] [--runs 3] [--train-levels 3] [--test-levels N] [--optimizer-model SPEC] [--out DIR]
[--resume]: the agent-learning study of AutoEnv §5.3 — Table 5 and Figure 3 (learning/).

Writes the study folder (learning/study.py) and prints the table. Exit 0; 1 when a run stopped on
a failed model call; 3 when a budget cap stopped a run (re-run with the same --out and --resume to go on).

With --provider replay, settings not given on the command line are those the recording was made
with (DIR/learn/settings.json, which --record writes): a replay asks the recording's questions.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline import records as files
from learning import methods as method_space
from learning.candidates import COMPONENTS
from learning.report import TABLE_MD
from learning.selection import SELECTIONS
from learning.settings import Settings
from learning.study import open_study, run_study
from pipeline.commands.evaluate import find_targets
from pipeline.argtypes import out_dir
from pipeline.errors import UserError
from pipeline.llm import LLMClient
from pipeline.llm.cli_args import EXIT_BUDGET_EXCEEDED, EXIT_MODEL_FAILED, add_llm_arguments, config_from_args, run_with_client
from pipeline.sandbox.outside.executor import add_executor_arguments

RECORDED_SETTINGS = Path("learn") / "settings.json"  # inside a --record / --replay folder
FLAGS = {  # settings field -> (flag, type, help)
    "iterations": ("--iterations", int, "learning iterations per environment and method (default 10, as in the paper)"),
    "runs": ("--runs", int, "runs per level, on training and test levels (default 3, as in the paper)"),
    "train_levels": ("--train-levels", int, "training levels per iteration, freshly generated (default 3)"),
    "test_levels": ("--test-levels", int, "test levels: the first N of each environment's levels/ (default: all)"),
    "max_parents": ("--max-parents", int, "Pareto selection: at most N front members optimized per iteration (default 2)"),
    "concurrency": ("--concurrency", int, "episodes at once (default 8; one at a time when recording or replaying)"),
    "max_steps": ("--max-steps", int, "turns per episode (default: the environment's termination.max_steps)"),
    "signal_episodes": ("--signal-episodes", int, "trajectories the signal step reads (default 3: worst, middle, best)"),
    "max_tokens": ("--max-tokens", int, "output tokens per model call (default 4096)"),
    "temperature": ("--temperature", float, "sampling temperature of both models (default: the provider's)"),
}


DESCRIPTION = """AutoEnv's component-centric learning (Algorithm 2): each method (selection x signal
x component) improves the agent's prompt or agent code on each environment from the trajectories of
its candidates on freshly generated training levels; the final candidate plays the fixed test
levels. Reports Table 5 (scores, cost, UpperBound(best/pareto/all)), Figure 3 and an adaptive choice
of method per environment."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "learn", description=DESCRIPTION,
        help="agent learning over environments: eight methods, upper bounds, Table 5 and Figure 3")
    p.add_argument("env_dirs", nargs="*", metavar="ENV_DIR",
                   help="environment folders, or folders holding them (with --resume: the study's)")
    m = p.add_argument_group("methods: selection x signal x component")
    m.add_argument("--methods", metavar="WHICH",
                   help=f"all (default: the paper's eight), names such as {method_space.ALL[0].name},"
                        f"{method_space.ALL[-1].name}, or a YAML file listing {{selection, signal, component}}")
    m.add_argument("--selection", choices=sorted(SELECTIONS), help="one method: best or pareto")
    m.add_argument("--signal", metavar="NAME", help=f"one method: {' or '.join(method_space.signals())} "
                                                      "(any templates/learn/signal_NAME.j2)")
    m.add_argument("--component", choices=COMPONENTS, help="one method: what the rewrite changes")
    s = p.add_argument_group("study")
    for field, (flag, kind, text) in FLAGS.items():
        s.add_argument(flag, dest=field, type=kind, metavar="N" if kind is int else "X", help=text)
    s.add_argument("--out", type=out_dir, default="runs/learn", metavar="DIR", help="study folder (default runs/learn)")
    s.add_argument("--resume", action="store_true",
                   help="continue the study in --out as it was started (its environments, methods and settings); "
                        "without it, an --out that holds a study is refused (as generate and evaluate refuse an "
                        "--out holding a run)")
    o = p.add_argument_group("optimizer model (default: the execution model, --model)")
    o.add_argument("--optimizer-model", metavar="SPEC", help="the model that analyzes trajectories and rewrites components")
    o.add_argument("--optimizer-base-url", metavar="URL", help="its API base URL, if not --base-url")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def chosen_methods(args) -> list[method_space.Method]:
    one = (args.selection, args.signal, args.component)
    if any(one):
        if args.methods:
            raise UserError("give either --methods or --selection/--signal/--component, not both")
        return [method_space.Method(args.selection or "best", args.signal or "dynamics",
                                    args.component or "prompt").check()]
    return method_space.parse(args.methods or "all")


def run(args) -> int:
    for field, (flag, _, _) in FLAGS.items():
        value = getattr(args, field)
        if value is not None and field != "temperature" and value < (0 if field == "max_steps" else 1):
            raise UserError(f"{flag}: expected a positive number, found {value}")
    out = Path(args.out)
    if not args.resume and not args.env_dirs:
        raise UserError("expected environment folders (or --resume to continue the study in --out)")
    methods = chosen_methods(args)
    if not args.resume:  # before anything is written: a typo must not leave a study behind
        find_targets(args.env_dirs, "test")
    args.max_concurrency = args.max_concurrency or args.concurrency or Settings.concurrency
    return run_with_client(args, lambda client: _study(args, client, out, methods))


async def _study(args, client: LLMClient, out: Path, methods) -> int:
    with files.locked(out, "learn"):
        return await _locked_study(args, client, out, methods)


async def _locked_study(args, client: LLMClient, out: Path, methods) -> int:
    settings = _settings(args, client)
    optimizer = _optimizer_client(args, client)
    description = {"envs": [str(Path(p).resolve()) for p in args.env_dirs], "methods": [vars(m) for m in methods],
                   "settings": _study_settings(settings), "execution_model": client.spec,
                   "optimizer_model": optimizer.spec}
    description = open_study(out, description, args.resume)
    targets = find_targets(description["envs"], "test")
    methods = [method_space.Method(**m).check() for m in description["methods"]]
    # How many episodes run at once is not part of what the study is: it may change on every run.
    settings = Settings.from_dict({**description["settings"], "concurrency": settings.concurrency})
    if (description["execution_model"], description["optimizer_model"]) != (client.spec, optimizer.spec):
        raise UserError(f"{out}: the study uses {description['execution_model']} (optimizer "
                        f"{description['optimizer_model']}); found {client.spec} (optimizer {optimizer.spec})")
    sequential = any(c.config.replay_dir or c.config.record_dir for c in (client, optimizer))
    print(f"learn: {len(targets)} environment(s) x {len(methods)} method(s), {settings.iterations} iteration(s), "
          f"{settings.runs} run(s) per level, {settings.train_levels} training level(s) per iteration; "
          f"execution {client.spec}, optimizer {optimizer.spec}; study in {out}", flush=True)
    try:
        outcome = await run_study(out, targets, methods, settings, client, optimizer, sequential,
                                  say=lambda line: print(line, flush=True))
    finally:
        if optimizer is not client:
            await optimizer.aclose()
    table = (out / "report" / TABLE_MD).read_text(encoding="utf-8")
    print("\n" + table.split("\n## ")[0].strip())
    print("written: " + ", ".join(str(p) for p in outcome.report))
    if outcome.stopped:
        for name, why in outcome.stopped.items():
            print(f"envforge learn: {name} stopped: {why}", file=sys.stderr)
        print(f"envforge learn: {len(outcome.stopped)} run(s) stopped early; re-run with the same --out to go on "
              f"(add --resume)", file=sys.stderr)
        return EXIT_BUDGET_EXCEEDED if outcome.budget else EXIT_MODEL_FAILED
    return 0


def _settings(args, client: LLMClient) -> Settings:
    """The flags given, over the recording's settings when replaying, over the defaults."""
    given = {field: getattr(args, field) for field in FLAGS if getattr(args, field) is not None}
    recorded = {}
    replay = client.config.replay_dir
    if replay is not None and (replay / RECORDED_SETTINGS).is_file():
        recorded = files.read_json(replay / RECORDED_SETTINGS, "learn_settings")
    settings = Settings.from_dict({**recorded, **given})
    if client.config.record_dir is not None:
        files.write_json(client.config.record_dir / RECORDED_SETTINGS, "learn_settings", _study_settings(settings),
                         indent=1)
    return settings


def _study_settings(settings: Settings) -> dict:
    return {k: v for k, v in settings.to_dict().items() if k != "concurrency"}


def _optimizer_client(args, client: LLMClient) -> LLMClient:
    """The optimizer's client, on the execution client's ledger (one budget, one cost summary)."""
    if client.config.provider == "replay" or not (args.optimizer_model or args.optimizer_base_url):
        return client
    own = argparse.Namespace(**{**vars(args), "model": args.optimizer_model or args.model,
                                "base_url": args.optimizer_base_url or args.base_url})
    return LLMClient(config_from_args(own), ledger=client.ledger)
