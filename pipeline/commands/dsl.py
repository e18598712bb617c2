"""`envforge dsl check FILE…`: check environment DSL documents against the schema and the rules.

Prints every problem of every file, one per line as `FILE: path.to.field: expected …, found …`
followed by `[error]` or `[warning]`, then a summary. Exit status 1 if any file has an error.
"""
from __future__ import annotations

import argparse
import json

from envforge.dsl_schema import check_file
from envforge.dsl_schema.problems import errors, warnings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dsl", help="work with environment DSL documents (config.yaml)")
    commands = parser.add_subparsers(dest="dsl_command", metavar="DSL_COMMAND")
    check = commands.add_parser(
        "check",
        help="check DSL documents; exit 1 if any has an error",
        description="Check DSL documents against the envforge DSL schema and its semantic rules. "
        "Reports all problems at once; exit status 1 on any error, 0 if there are only warnings.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="DSL YAML files (config.yaml)")
    check.add_argument("--json", action="store_true", help="print a JSON object with the problems and a summary")
    check.set_defaults(func=run)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def run(args: argparse.Namespace) -> int:
    problems = [p for path in args.files for p in check_file(path)]
    summary = {
        "files": len(args.files),
        "files_with_errors": len({p.file for p in errors(problems)}),
        "errors": len(errors(problems)),
        "warnings": len(warnings(problems)),
    }
    if args.json:
        print(json.dumps({"problems": [p.to_dict() for p in problems], "summary": summary}, indent=2))
    else:
        for problem in problems:
            print(f"{problem} [{problem.severity}]")
        noun = "file" if summary["files"] == 1 else "files"
        print(f"{summary['files']} {noun} checked: {summary['errors']} error(s), {summary['warnings']} warning(s)")
    return 1 if summary["errors"] else 0
