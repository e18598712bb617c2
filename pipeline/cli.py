"""The `envforge` command line: one subcommand per module in pipeline/commands/.

Each command module declares its command with `@command(...)` (pipeline/commands/_flags.py) over
the function that runs it, its `run`, which returns the exit status; a command whose parser is a
tree of subcommands (dsl, review) adds it itself, in the module's `register(subparsers)`.
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys

# Only the standard library's lightest modules at the top: a Ctrl-C while the rest is imported (a
# third of a second) is the command's, and ends in its one line (main).
EXIT_INTERRUPTED = 130  # pipeline/generate/interrupt.py says it too; a test holds them equal
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away

# Commands that run environment code (in sandbox workers): they refuse to start where no rung of
# the confinement ladder applies, unless --unconfined (pipeline/sandbox/outside/capabilities.py). `review`
# runs env code only for its previews; its workers refuse then.
RUNS_ENV_CODE = {"generate", "check", "play", "verify", "levels", "probe", "reskin", "evaluate", "learn", "serve"}
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
    "envforge.pipeline.commands.levels",
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
    import importlib

    from envforge.pipeline import __version__

    parser = Parser(
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


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error is one line with a suggestion (`did you mean --json?`),
    not the usage of every flag: the command's `--help` lists them. Subcommands' parsers are made of
    the same class (argparse's default)."""

    def error(self, message: str):
        # A value's own check says what it expected; a flag or choice argparse does not know, or one
        # missing, points at the help as well.
        then = "" if ": expected " in message else f"; `{self.prog} --help` lists what it takes"
        self.exit(2, f"{self.prog}: error: {message}{_suggestion(message, self)}{then}\n")


def _suggestion(message: str, parser: argparse.ArgumentParser) -> str:
    """` — did you mean X?` for a mistyped flag or choice in argparse's `message`, or ""."""
    choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
    if choice:
        known = re.findall(r"'([^']*)'", choice.group(2)) or [c.strip() for c in choice.group(2).split(",")]
        close = difflib.get_close_matches(choice.group(1), known, n=1)
        return f" — did you mean {close[0]!r}?" if close else ""
    if "unrecognized arguments" not in message:
        return ""
    flags = [f for action in parser._actions for f in action.option_strings]
    for typed in message.partition(":")[2].split():
        close = difflib.get_close_matches(typed.split("=")[0], flags, n=1) if typed.startswith("-") else []
        if close:
            return f" — did you mean {close[0]}?"
    return ""


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
    """Run one command; what it prints goes through terminal.Shown (see there). However it ends —
    Ctrl-C at any instant (the imports included), a closed pipe, a full disk — it ends in one line
    and an exit status, never a traceback."""
    typed = (argv if argv is not None else sys.argv[1:])[:1]
    name = " ".join(["envforge", *typed[:1]]) if typed and not typed[0].startswith("-") else "envforge"
    streams = sys.stdout, sys.stderr
    try:
        from envforge.pipeline.terminal import Shown

        _open_standard_streams()
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = (s if isinstance(s, Shown) else Shown(s, name)
                                  for s, name in zip(streams, ("stdout", "stderr")))
        return _run(argv)
    except KeyboardInterrupt:  # before the command started (its own Ctrl-C is _run's)
        _say(f"{name}: interrupted before it started; nothing was done")
        return EXIT_INTERRUPTED
    finally:
        sys.stdout, sys.stderr = streams
        _flush_or_drop(streams)


def _say(line: str) -> None:
    """`line` on stderr, or nowhere when stderr is closed too."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    except BaseException as exc:  # terminal.OutputClosed: stderr's reader went away as well
        if type(exc).__name__ != "OutputClosed":
            raise


def _flush_or_drop(streams) -> None:
    """Flush what the command printed; a stream whose reader went away is pointed at /dev/null, so
    Python's own flush at exit does not fail (it would exit 120)."""
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError):
            _drop(stream)


def _drop(stream) -> None:
    """Point `stream`'s file descriptor at /dev/null (what it still buffers goes nowhere)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _run(argv: list[str] | None) -> int:
    import sqlite3

    from envforge.pipeline.errors import DiskFull, InfrastructureError, OutputClosed, UserError, write_fault
    from envforge.pipeline.sandbox.outside.capabilities import OPT_IN_VARIABLE, require
    from envforge.pipeline.sandbox.outside.failures import SandboxFailure

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    parser.set_defaults(argv=argv)  # as typed: the resume hint repeats it
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's own parser says it, with a suggestion from its flags
        sub = _subparsers(parser).get(getattr(args, "command", None) or "", parser)
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2

    def resume(then: str) -> str:
        from envforge.pipeline.generate.interrupt import resume_command  # when needed: it imports asyncio

        hint = resume_command(args)
        return f"; `{hint}` {then}" if hint else ""

    try:
        if args.unconfined:
            os.environ[OPT_IN_VARIABLE] = "1"  # read by every worker this process starts
        if args.command in RUNS_ENV_CODE:
            require()  # no sandbox, no run: one line, before anything else happens
        return int(args.func(args) or 0)
    except UserError as exc:
        then = resume("continues where it stopped") if isinstance(exc, DiskFull) else ""
        print(f"envforge {args.command}: error: {exc}{then}", file=sys.stderr)
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
        print(f"envforge {args.command}: interrupted" + resume("continues where it stopped"), file=sys.stderr)
        return EXIT_INTERRUPTED
    except (OutputClosed, BrokenPipeError) as exc:
        # The reader went away (`envforge generate | head`): what was written is kept; the other
        # stream, when someone still reads it, says how to go on.
        _drop(sys.stdout)
        if isinstance(exc, OutputClosed) and exc.args and exc.args[0] == "stderr":
            return EXIT_OUTPUT_CLOSED
        _say(f"envforge {args.command}: stopped: the reader of its output went away (a closed pipe)"
             + resume("continues where it stopped"))
        return EXIT_OUTPUT_CLOSED
    except (OSError, sqlite3.Error) as exc:
        fault = write_fault(exc)  # a full disk or a folder it may not write, met where no one said so
        if fault is None:
            raise
        print(f"envforge {args.command}: error: {fault}" + resume("continues where it stopped"), file=sys.stderr)
        return 2


def _subparsers(parser: argparse.ArgumentParser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


if __name__ == "__main__":
    sys.exit(main())
