"""envforge generate --themes FILE: themes in, verified environments out."""
from __future__ import annotations

import argparse
import json
import sys

from envforge.pipeline.api.generate import GenerateJob, GenerateOptions
from envforge.pipeline.commands._flags import command
from envforge.pipeline.commands._run import EXIT_BUDGET_EXCEEDED, print_cost_summary, run_with_client
from envforge.pipeline.generate.interrupt import EXIT_INTERRUPTED, resume_command
from envforge.pipeline.generate.run import errors_alike, print_summary, some_names

EXIT_ACCEPTED, EXIT_NONE_ACCEPTED, EXIT_ERROR = 0, 1, 2

EPILOG = """exit status: 0 the run finished and accepted at least one environment (or paused as asked);
1 it finished and accepted none; 2 bad input (themes file, output folder, flags, a file a person
edited in a pause: the theme stays paused), or a theme that
could not be judged (no recording for it, a template missing from the installation): one line for
each kind of error, and such a theme is not counted in the table; a full disk or an output folder
it cannot write also ends in one line (its --resume continues); 3 the run budget (--budget-usd) was
reached: themes not started are listed as skipped, and those it stopped are not counted in the table;
130 Ctrl-C; 141 the reader of its output went away (a closed pipe). What was written is kept.
Offline demo (no key): envforge generate --themes examples/themes.txt --provider replay --out runs/demo
(in a checkout), or, from any folder, envforge generate --demo --out runs/demo"""


DESCRIPTION = """Each theme goes through design, DSL, code, repair (up to 40 check-driven steps), verification \
(execution, levels, reliability) and lands in OUT/<name>/ or OUT/_rejected/<name>/ with the stage \
and reason."""


@command("generate", GenerateOptions, description=DESCRIPTION, json="print the summary as JSON",
         help="turn themes into verified environments (the main job)",
         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
def run(args, options: GenerateOptions) -> int:
    job = GenerateJob(options, resume_command(args))
    # The output folder is made only once the provider is configured: a bad flag writes nothing.
    try:
        return run_with_client(job.options.llm, "generate", lambda client: _generate(job, client, args.json),
                               json=args.json)
    finally:
        for client in job.clients():
            print_cost_summary(client, json=args.json)


async def _generate(job: GenerateJob, client, as_json: bool) -> int:
    summary = await job.run(client)
    if summary["interrupted"]:
        kept = f"; kept the finished work of {some_names(summary['kept'])}" if summary.get("kept") else ""
        print(f"envforge generate: interrupted{kept}; `{job.resume_hint}` continues the run from where it stopped",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary)
    for names in errors_alike(summary["errors"]).values():  # repeated errors: one line, with a count
        more = f" (and {len(names) - 1} more theme(s) alike: {some_names(names[1:])})" if len(names) > 1 else ""
        print(f"envforge generate: {names[0]}: {summary['errors'][names[0]]['reason']}{more}", file=sys.stderr)
    if summary["stopped"]:
        print(f"envforge generate: {summary['stopped'].removeprefix('not started: ')}", file=sys.stderr)
        return EXIT_BUDGET_EXCEEDED
    for name, wrong in summary["edit_errors"].items():  # a person's edit in a pause: theirs to fix
        print(f"envforge generate: {name} stays paused: {wrong}", file=sys.stderr)
    if summary["errors"] or summary["edit_errors"]:
        return EXIT_ERROR
    return EXIT_ACCEPTED if summary["accepted"] or summary["paused"] else EXIT_NONE_ACCEPTED
