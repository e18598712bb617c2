"""Ctrl-C: the command that resumes (every command), and `envforge generate`'s two-step stop.

The first Ctrl-C says at once what the run is waiting for (a stage's sandbox call cannot be cut
short; its thread ends on its own limits, and what it found is recorded: ThemeContext.sandboxed) and
that `--resume` continues, then stops starting anything. A second Ctrl-C stops at once, quietly:
the run database, call journals and work folders are written as the run goes, so nothing is lost,
and the sandbox workers notice that their parent is gone.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
from typing import Callable, Iterator

EXIT_INTERRUPTED = 130


def resume_command(args) -> str:
    """The command line that continues an interrupted run: the one typed (`--demo` stays `--demo`,
    never the path of the bundled files it stands for, which for an installed wheel is inside
    site-packages), with --resume. "" for a command that has no --resume."""
    if not hasattr(args, "resume"):
        return ""
    argv = list(getattr(args, "argv", None) or [])
    if not argv:
        return ""
    return shlex.join(["envforge", *argv, *([] if "--resume" in argv else ["--resume"])])


@contextlib.contextmanager
def on_interrupt(work: asyncio.Future, waiting_for: Callable[[], str], resume: str) -> Iterator[list[bool]]:
    """While inside, SIGINT cancels `work` (first) or exits (second). Yields a list that holds
    True once interrupted. Outside the main thread (an embedding program), nothing changes."""
    loop = asyncio.get_running_loop()
    pressed: list[bool] = []

    def on_sigint() -> None:
        pressed.append(True)
        # From now on, and until the process ends (threads still running are joined at exit),
        # a Ctrl-C ends it at once.
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, _stop_now)
        print(f"\nenvforge generate: interrupted; waiting for {waiting_for()} to finish (its work is kept, so "
              f"`{resume}` does not repeat it); press Ctrl-C again to stop at once.", file=sys.stderr, flush=True)
        work.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (RuntimeError, ValueError, NotImplementedError):  # not the main thread, or no signals here
        yield pressed
        return
    try:
        yield pressed
    finally:
        if not pressed:
            loop.remove_signal_handler(signal.SIGINT)


def _stop_now(signum, frame) -> None:
    os._exit(EXIT_INTERRUPTED)
