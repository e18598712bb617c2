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

from envforge.learning.report import TABLE_MD
from envforge.pipeline.api.learn import LearnJob, LearnOptions
from envforge.pipeline.commands._flags import command, env_dirs
from envforge.pipeline.commands._run import EXIT_BUDGET_EXCEEDED, EXIT_MODEL_FAILED, run_with_client

DESCRIPTION = """AutoEnv's component-centric learning (Algorithm 2): each method (selection x signal
x component) improves the agent's prompt or agent code on each environment from the trajectories of
its candidates on freshly generated training levels; the final candidate plays the fixed test
levels. Reports Table 5 (scores, cost, UpperBound(best/pareto/all)), Figure 3 and an adaptive choice
of method per environment."""


@command("learn", LearnOptions, description=DESCRIPTION,
         help="agent learning over environments: eight methods, upper bounds, Table 5 and Figure 3",
         arguments=[env_dirs(" (with --resume: the study's)")])
def run(args, options: LearnOptions) -> int:
    job = LearnJob(args.env_dirs, options)
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
