"""The `envforge` command line: one subcommand per module in pipeline/commands/.

Each command module declares its command with `@command(...)` (pipeline/commands/_flags.py) over
the function that runs it, its `run`, which returns the exit status; a command whose parser is a
tree of subcommands (dsl, review) adds it itself, in the module's `register(subparsers)`.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from envforge.pipeline import __version__
from envforge.pipeline.errors import InfrastructureError, UserError
from envforge.pipeline.sandbox.outside.capabilities import OPT_IN_VARIABLE, require
from envforge.pipeline.sandbox.outside.failures import SandboxFailure
from envforge.pipeline.terminal import Shown

# Commands that run environment code (in sandbox workers): they refuse to start where no rung of
# the confinement ladder applies, unless --unconfined (pipeline/sandbox/outside/capabilities.py). `review`
# runs env code only for its previews; its workers refuse then.
RUNS_ENV_CODE = {"generate", "check", "play", "verify", "probe", "reskin", "evaluate", "learn", "serve"}
UNCONFINED_HELP = ("run environment code even where no sandbox can be made (no rung of the confinement "
                   "ladder: see `envforge doctor`); it can then read and write what you can and reach the "
                   "network. Same as ENVFORGE_UNCONFINED=1")

# Add a module here to add a subcommand.
COMMAND_MODULES = [
    "envforge.pipeline.commands.generate",
    "envforge.pipeline.commands.check",
    "envforge.pipeline.commands.doctor",
    "envforge.pipeline.commands.play",
    "envforge.pipeline.commands.dsl",
    "envforge.pipeline.commands.verify",
    "envforge.pipeline.commands.probe",
    "envforge.pipeline.commands.reskin",
    "envforge.pipeline.commands.evaluate",
    "envforge.pipeline.commands.learn",
    "envforge.pipeline.commands.review",
    "envforge.pipeline.commands.serve",
    "envforge.pipeline.commands.export",
]


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: when it names a command, only that command's module is imported (a
    command's imports cost a fraction of a second of every run); otherwise every command's, so that
    help and a mistyped command list them all; `--version` alone, none (it answers before any command)."""
    parser = argparse.ArgumentParser(
        prog="envforge",
        description="Turn environment themes into verified text environments for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"envforge {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = [f"envforge.pipeline.commands.{argv[0]}"] if argv else []
    parser.add_argument("--unconfined", action="store_true", help=UNCONFINED_HELP)
    if argv and argv[0] == "--version":
        named = []
    elif not (named and named[0] in COMMAND_MODULES):
        named = COMMAND_MODULES
    for name in named:
        module = importlib.import_module(name)
        (module.register if hasattr(module, "register") else module.run.register)(subparsers)
    for command, sub in subparsers.choices.items():
        if command in RUNS_ENV_CODE or command == "review":
            sub.add_argument("--unconfined", action="store_true", default=argparse.SUPPRESS, help=UNCONFINED_HELP)
    return parser


def _open_standard_streams() -> None:
    """A closed stdin, stdout or stderr (`envforge play <&-`) is opened on /dev/null: otherwise
    the next pipe made (a sandbox worker's) takes its number and the worker's replies get mixed
    with the terminal's."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, mode)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            stream = open(fd, "r" if fd == 0 else "w", closefd=False)  # noqa: SIM115 - the process's own stream
            setattr(sys, ("stdin", "stdout", "stderr")[fd], stream)


def main(argv: list[str] | None = None) -> int:
    """Run one command; what it prints goes through terminal.Shown (see there)."""
    _open_standard_streams()
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if isinstance(s, Shown) else Shown(s) for s in streams)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    parser.set_defaults(argv=argv)  # as typed: the resume hint repeats it
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.unconfined:
            os.environ[OPT_IN_VARIABLE] = "1"  # read by every worker this process starts
        if args.command in RUNS_ENV_CODE:
            require()  # no sandbox, no run: one line, before anything else happens
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"envforge {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except InfrastructureError as exc:
        print(f"envforge {args.command}: infrastructure failure: {exc} (nothing was judged; run the same "
              f"command again to resume)", file=sys.stderr)
        return 1
    except SandboxFailure as exc:
        # An environment the command needed failed in the sandbox: a finding about that
        # environment, said in one located line, not a traceback.
        print(f"envforge {args.command}: the environment failed in the sandbox: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        from envforge.pipeline.generate.interrupt import EXIT_INTERRUPTED, resume_command

        resume = resume_command(args)
        print(f"envforge {args.command}: interrupted" + (f"; `{resume}` continues where it stopped" if resume else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`envforge review | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
