"""envforge check ENV_DIR [--json]: the basic code test of an environment, in the sandbox."""
from __future__ import annotations

import json

from envforge.pipeline.api.check import CheckOptions, check
from envforge.pipeline.commands._flags import command, env_dir

DESCRIPTION = """Import, reset on every level, step every action, run random episodes, test the generator, validator
and determinism — all in the sandbox. Exit 0 when clean, 1 otherwise."""


@command("check", CheckOptions, description=DESCRIPTION, without=["executor"],
         json="print the report as JSON (what the repair loop reads)",
         help="exercise an environment folder in the sandbox and list its problems",
         arguments=[env_dir(" (env_main.py, config.yaml, levels/)")])
def run(args, options: CheckOptions) -> int:
    report = check(args.env_dir, options)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0 if report.ok else 1
    for problem in report.problems:
        tag = "" if problem.severity == "error" else "warning: "
        print(f"{tag}{problem}")
    if report.stats.get("not_imported"):
        print(f"note: not imported by the environment, so not checked: {', '.join(report.stats['not_imported'])}")
    errors = sum(p.severity == "error" for p in report.problems)
    warnings = len(report.problems) - errors
    stats = report.stats
    from envforge.pipeline.sandbox.outside.capabilities import ran_as, ran_under

    # the confinement the env's code ran under and the uid it ran as (capabilities.py)
    sandbox = f"sandbox: {ran_under()}, env code as {ran_as()}"
    if report.ok:
        print(f"ok: {args.env_dir}: {stats.get('levels', 0)} levels, {stats.get('actions', 0)} actions, "
              f"random episodes of {stats.get('random_episode_steps', [])} steps"
              + (f", {warnings} warning(s)" if warnings else "") + f", {sandbox} ({stats.get('seconds')}s)")
        return 0
    print(f"FAILED: {args.env_dir}: {errors} error(s), {warnings} warning(s), {sandbox} ({stats.get('seconds')}s)")
    return 1
