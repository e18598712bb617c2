"""What envforge prints carries no terminal control sequence it did not mean to send.

Much of what a command prints comes from an environment: an exception's message, the worker's
output, an observation, an instruction or action description from its folder, a level's file
name. An escape sequence among them could retitle the terminal, write the clipboard (OSC 52),
clear the screen, or with a carriage return or a newline print over a line (`FAILED: …` made to
read `ok: …`). Rather than escape each source, the command line writes everything through
`Shown`, which shows each control character as its Python escape: line breaks and tabs pass.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, TextIO

_KEPT = {"\n", "\t"}
# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a reader sees.
_CONTROLS = [chr(c) for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
                              *range(0x2066, 0x206A))]
_TABLE = str.maketrans({c: repr(c)[1:-1] for c in _CONTROLS if c not in _KEPT})


def shown(text: str) -> str:
    """`text` with every control character (but newline and tab) written as its escape."""
    return text.translate(_TABLE)


class Shown:
    """A text stream that writes `shown(text)` to `stream`; anything else is the stream's own.
    `name`: "stdout" or "stderr". When its reader goes away (a closed pipe), the stream is pointed
    at /dev/null and `OutputClosed(name)` stops the command (pipeline/cli.py says so on the other
    stream): a BaseException, so no stage records it as a bug of its own."""

    def __init__(self, stream: TextIO, name: str = ""):
        self.stream, self.name = stream, name

    def write(self, text: str) -> int:
        try:
            self.stream.write(shown(text))
        except BrokenPipeError:
            self._closed()
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        from envforge.pipeline.errors import OutputClosed

        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
        raise OutputClosed(self.name)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def unfiltered(stream: TextIO) -> TextIO:
    """The stream under `Shown`: for envforge's own progress bar, which redraws with a carriage return."""
    return stream.stream if isinstance(stream, Shown) else stream


def in_notebook(stream: TextIO) -> bool:
    """Whether `stream` is a Jupyter kernel's output (ipykernel's OutStream), which shows a carriage
    return as a redraw of the line: progress there is one line redrawn, not a line per update."""
    return type(unfiltered(stream)).__module__.split(".")[0] == "ipykernel"


class StatusLine:
    """Progress on one line, redrawn (a notebook cell): `show` replaces the line, `keep` prints a line
    that stays (an outcome) and redraws nothing until the next `show`."""

    WIDTH = 160  # a cell's line is not measured: long ones are cut

    def __init__(self, stream: TextIO):
        self.stream, self.shown = unfiltered(stream), 0

    def show(self, text: str) -> None:
        text = shown(text)[: self.WIDTH]
        self.stream.write("\r" + text.ljust(self.shown))
        self.stream.flush()
        self.shown = len(text)

    def keep(self, text: str) -> None:
        self.stream.write("\r" + shown(text).ljust(self.shown) + "\n")
        self.stream.flush()
        self.shown = 0

    def close(self) -> None:
        """End the redrawn line, so what is printed next starts a line of its own."""
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = 0
