"""envforge learn ENV_DIR… [--methods all|NAMES|FILE.yaml | --selection S --signal G --component C]
[--iterations 10] [--runs 3] [--train-levels 3] [--test-levels N] [--optimizer-model SPEC] [--out DIR]
[--resume]: the agent-learning study of AutoEnv §5.3 — Table 5 and Figure 3 (learning/).

Writes the study folder (learning/study.py) and prints the table. Exit 0; 1 when a run stopped on
a failed model call; 3 when a budget cap stopped a run (re-run with the same --out and --resume to go on).

With --provider replay, settings not given on the command line are those the recording was made
with (DIR/learn/settings.json, which --record writes): a replay asks the recording's questions.
"""
from __future__ import annotations

import sys

from learning import methods as method_space
from learning.report import TABLE_MD
from learning.settings import Settings
from pipeline.api.learn import LearnJob, LearnOptions
from pipeline.commands._flags import add_executor_arguments, add_llm_arguments, add_option
from pipeline.commands._run import EXIT_BUDGET_EXCEEDED, EXIT_MODEL_FAILED, run_with_client

FLAGS = {  # the study's settings: option -> (type, help); each default is learning.settings.Settings'
    "iterations": (int, f"learning iterations per environment and method (default {Settings.iterations}, as in the "
                        f"paper)"),
    "runs": (int, f"runs per level, on training and test levels (default {Settings.runs}, as in the paper)"),
    "train_levels": (int, f"training levels per iteration, freshly generated (default {Settings.train_levels})"),
    "test_levels": (int, "test levels: the first N of each environment's levels/ (default: all)"),
    "max_parents": (int, f"Pareto selection: at most N front members optimized per iteration (default "
                         f"{Settings.max_parents})"),
    "concurrency": (int, f"episodes at once (default {Settings.concurrency}; one at a time when recording or "
                         f"replaying)"),
    "max_steps": (int, "turns per episode (default: the environment's termination.max_steps)"),
    "signal_episodes": (int, f"trajectories the signal step reads (default {Settings.signal_episodes}: worst, "
                             f"middle, best)"),
    "max_tokens": (int, f"output tokens per model call (default {Settings.max_tokens})"),
    "temperature": (float, "sampling temperature of both models (default: the provider's)"),
}


DESCRIPTION = """AutoEnv's component-centric learning (Algorithm 2): each method (selection x signal
x component) improves the agent's prompt or agent code on each environment from the trajectories of
its candidates on freshly generated training levels; the final candidate plays the fixed test
levels. Reports Table 5 (scores, cost, UpperBound(best/pareto/all)), Figure 3 and an adaptive choice
of method per environment."""


def register(subparsers) -> None:
    O = LearnOptions  # noqa: N806 - every default below is its field's
    p = subparsers.add_parser(
        "learn", description=DESCRIPTION,
        help="agent learning over environments: eight methods, upper bounds, Table 5 and Figure 3")
    p.add_argument("env_dirs", nargs="*", metavar="ENV_DIR",
                   help="environment folders, or folders holding them (with --resume: the study's)")
    m = p.add_argument_group("methods: selection x signal x component")
    add_option(m, O, "methods", metavar="WHICH",
               help=f"all (default: the paper's eight), names such as {method_space.ALL[0].name},"
                    f"{method_space.ALL[-1].name}, or a YAML file listing {{selection, signal, component}}")
    add_option(m, O, "selection", help="one method: best or pareto")
    add_option(m, O, "signal", metavar="NAME", help=f"one method: {' or '.join(method_space.signals())} "
                                                     "(any templates/learn/signal_NAME.j2)")
    add_option(m, O, "component", help="one method: what the rewrite changes")
    s = p.add_argument_group("study")
    for name, (kind, text) in FLAGS.items():
        add_option(s, O, name, type=kind, metavar="N" if kind is int else "X", help=text)
    add_option(s, O, "out", metavar="DIR", help="study folder (default %(default)s)")
    add_option(s, O, "resume",
               help="continue the study in --out as it was started (its environments, methods and settings); "
                    "without it, an --out that holds a study is refused (as generate and evaluate refuse an "
                    "--out holding a run)")
    o = p.add_argument_group("optimizer model (default: the execution model, --model)")
    add_option(o, O, "optimizer_model", metavar="SPEC",
               help="the model that analyzes trajectories and rewrites components")
    add_option(o, O, "optimizer_base_url", metavar="URL", help="its API base URL, if not --base-url")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    job = LearnJob(args.env_dirs, LearnOptions.from_args(args))
    return run_with_client(job.llm, "learn", lambda client: _study(job, client))


async def _study(job: LearnJob, client) -> int:
    outcome = await job.run(client, say=lambda line: print(line, flush=True))
    table = (job.out / "report" / TABLE_MD).read_text(encoding="utf-8")
    print("\n" + table.split("\n## ")[0].strip())
    print("written: " + ", ".join(str(p) for p in outcome.report))
    if outcome.stopped:
        for name, why in outcome.stopped.items():
            print(f"envforge learn: {name} stopped: {why}", file=sys.stderr)
        print(f"envforge learn: {len(outcome.stopped)} run(s) stopped early; re-run with the same --out to go on "
              f"(add --resume)", file=sys.stderr)
        return EXIT_BUDGET_EXCEEDED if outcome.budget else EXIT_MODEL_FAILED
    return 0
