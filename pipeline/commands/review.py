"""envforge review [list|show|play|retry|accept|reject|html]: look at what a generate run made
and why, play it, fix it, retry it from a stage, or decide by hand; a static HTML report."""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys

from envforge.pipeline import paths, quoting
from envforge.pipeline import records as files
from envforge.pipeline.api.options import LLMOptions
from envforge.pipeline.api.play import PlayOptions, play
from envforge.pipeline.api.values import LIMIT, folder
from envforge.pipeline.commands._flags import add_options, flag_type
from envforge.pipeline.commands._run import run_with_client
from envforge.pipeline.errors import UserError
from envforge.pipeline.layout import EnvDir
from envforge.pipeline.review import actions, catalog, show
from envforge.pipeline.review.advice import advise
from envforge.pipeline.review.catalog import Catalog
from envforge.pipeline.review.details import gather

EXIT_ACCEPTED, EXIT_REJECTED = 0, 1

EPILOG = """examples:
  envforge review                                   every environment of generated_envs/
  envforge review --status rejected --stage reliability
  envforge review show NAME                         why NAME stopped, what the agent changed, costs
  envforge review play NAME                         play it in the terminal
  envforge review retry NAME --from verify          re-verify the files as you edited them (no model)
  envforge review retry NAME --from repair --provider replay --replay DIR
  envforge review accept NAME --reason "the reward is fine: ..."
  envforge review html report/                      a static site; open report/index.html"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "review", help="list, explain, play, retry, accept or reject generated environments; HTML report",
        description="Review the environments of an `envforge generate` output folder. Without a subcommand: list them.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _out_argument(p, default=str(paths.GENERATED_ENVS_DIR))
    _list_arguments(p, defaults=True)
    p.set_defaults(func=run_list)
    sub = p.add_subparsers(dest="review_command", metavar="ACTION")

    q = sub.add_parser("list", help="the table of environments (the default)")
    _out_argument(q)
    _list_arguments(q, defaults=False)
    q.set_defaults(func=run_list)

    q = sub.add_parser("show", help="one environment: theme, design, DSL, failing check, agent history, costs")
    q.add_argument("name", metavar="NAME")
    _out_argument(q)
    q.add_argument("--full", action="store_true", help="do not shorten long files and tool results")
    q.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print it as JSON")
    q.set_defaults(func=run_show)

    q = sub.add_parser("play", help="play an environment in the terminal (envforge play)",
                       description="Play one level of an environment of the output folder, as envforge play does; "
                                   "one with no level files yet plays a level generated from seed 0.")
    q.add_argument("name", metavar="NAME")
    _out_argument(q)
    add_options(q, PlayOptions, without=["executor"])
    q.set_defaults(func=run_play)

    q = sub.add_parser("retry", help="run an environment again from a stage, with the files as you edited them",
                       description="Moves the folder back to OUT/_work/NAME, marks the stages from --from on as "
                                   "superseded in the run database, and runs them again; earlier stages and your "
                                   "edits are kept. --from verify needs no model; the model stages take the usual "
                                   "model flags (--provider replay works offline).")
    q.add_argument("name", metavar="NAME")
    _out_argument(q)
    q.add_argument("--from", dest="start", required=True, choices=actions.RETRY_STAGES,
                   help="the first stage to run again")
    q.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the outcome as JSON")
    add_options(q, LLMOptions)
    q.set_defaults(func=run_retry)

    for decision, verb in (("accepted", "accept"), ("rejected", "reject")):
        q = sub.add_parser(
            verb, help=f"{verb} an environment by hand (kept in its manifest, shown as '{decision} (by hand)')"
        )
        q.add_argument("name", metavar="NAME")
        _out_argument(q)
        q.add_argument("--reason", required=True, metavar="TEXT", help="why (kept in manifest.json)")
        q.set_defaults(func=run_decide, decision=decision)

    q = sub.add_parser("html", help="write a static HTML report (open OUT_DIR/index.html from disk)")
    q.add_argument("site", metavar="OUT_DIR", help="folder to write the report to")
    _out_argument(q)
    q.add_argument("--evaluation", action="append", default=[], metavar="DIR",
                   help="an `envforge evaluate --out` folder whose scores to show (repeatable)")
    q.add_argument(
        "--previews", type=flag_type(LIMIT), default=3, metavar="N", help="levels rendered per environment (default 3)"
    )
    q.set_defaults(func=run_html)


def _out_argument(parser, default=argparse.SUPPRESS) -> None:
    parser.add_argument("--out", type=flag_type(folder), default=default, metavar="DIR",
                        help="the output folder of `envforge generate` (default: generated_envs/)")


def _list_arguments(parser, defaults: bool) -> None:
    d = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    parser.add_argument("--status", choices=catalog.STATUS_FILTERS, default=d(None),
                        help="only environments with this status (by-hand: decided by a person)")
    parser.add_argument(
        "--stage", default=d(None), help="only those that stopped at this stage (e.g. repair, reliability)"
    )
    parser.add_argument("--reason", default=d(None), metavar="TEXT", help="only those whose reason contains TEXT")
    parser.add_argument("--sort", choices=catalog.SORT_KEYS, default=d("name"), help="sort by (default name)")
    parser.add_argument("--reverse", action="store_true", default=d(False), help="reverse the order")
    parser.add_argument("--json", action="store_true", default=d(False), help="print the rows as JSON")


def run_list(args) -> int:
    with Catalog.open(args.out) as cat:
        entries = cat.entries()
        shown = catalog.select(entries, args.status, args.stage, args.reason, args.sort, args.reverse)
    if args.json:
        print(json.dumps([e.to_dict() for e in shown], indent=2))
        return 0
    if not entries:
        print(f"{args.out}: the run database lists no environments yet")
        return 0
    print(show.table(shown))
    print(f"\n{len(shown)} of {len(entries)} shown ({show.counts(entries)}). "
          f"`envforge review show NAME` explains one.")
    return 0


def run_show(args) -> int:
    with Catalog.open(args.out) as cat:
        details = gather(cat.get(args.name))
    if getattr(args, "json", False):
        advice = advise(details)
        print(json.dumps({**details.to_dict(), "advice": advice.to_dict() if advice else None}, indent=2, default=str))
    else:
        sys.stdout.write(show.explain(details, full=args.full))
    return 0


def run_play(args) -> int:
    with Catalog.open(args.out) as cat:
        entry = cat.get(args.name)
    if not entry.folder:
        raise UserError(f"{args.name}: expected its folder under {args.out}, found none")
    options = PlayOptions.from_args(args)
    if options.seed is None and options.level is None and not EnvDir.at(entry.folder).all_levels():
        print(f"({args.name} has no level files yet: playing a level generated from seed 0)\n")
        options = dataclasses.replace(options, seed=0)
    return play(entry.folder, options)


def run_retry(args) -> int:
    cat = Catalog.open(args.out)
    try:
        plan = actions.plan_retry(cat, args.name, args.start)
        with files.locked(cat.out.root, "review retry"):  # the run's folder: no generate --resume meanwhile
            if plan.needs_model:
                return run_with_client(
                    LLMOptions.from_args(args),
                    "review",
                    lambda client: _retry(cat, plan, client, args),
                    json=getattr(args, "json", False),
                )
            return asyncio.run(_retry(cat, plan, None, args))
    finally:
        cat.close()


async def _retry(cat: Catalog, plan: actions.RetryPlan, client, args) -> int:
    outcome = await actions.retry(cat, plan, client)
    entry = cat.get(plan.entry.name)
    if getattr(args, "json", False):
        print(json.dumps(entry.to_dict(), indent=2))
    elif outcome.status == "accepted":
        print(f"{entry.name}: accepted -> {entry.folder}")
    else:
        print(f"{entry.name}: {outcome.status} at {outcome.stage}: {outcome.reason}\n"
              f"`envforge review show {quoting.shell(entry.name)}` explains it.")
    return EXIT_ACCEPTED if outcome.status == "accepted" else EXIT_REJECTED


def run_decide(args) -> int:
    with Catalog.open(args.out) as cat, files.locked(cat.out.root, f"review {args.decision[:-2]}"):
        entry = actions.decide(cat, args.name, args.decision, args.reason)
    print(f"{entry.name}: {entry.label} -> {entry.folder}" + (f"\n  {entry.reason}" if entry.reason else ""))
    return 0


def run_html(args) -> int:
    from envforge.pipeline.review.report import write_report

    with Catalog.open(args.out) as cat:
        index = write_report(cat, args.site, evaluations=args.evaluation, previews=args.previews)
    print(f"wrote {index} (open it in a browser; no server needed)")
    return 0
