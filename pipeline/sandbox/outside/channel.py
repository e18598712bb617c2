"""Parent side of the pipes to one sandbox worker: request lines out, reply lines in (each bounded
and checked to be a JSON mapping, requests the worker makes meanwhile handed to the caller), and
what the worker prints counted against its output limit. The process itself (started, killed,
its death classified) is process.WorkerProcess.
"""
from __future__ import annotations

import json
import os
import selectors
import time
from typing import Callable

from envforge.pipeline import safe_io
from envforge.pipeline.located import LocatedError
from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside.failures import SandboxFailure

PYTHON_INT_DIGITS = 4300  # sys.get_int_max_str_digits()'s default: the longest integer Python reads from text

OUTPUT_TAIL = 4096  # bytes of what the worker printed kept, for failures and death classification


class Gone(Exception):
    """The worker's end of a pipe is closed: it died (process.WorkerProcess._death says how)."""


class Channel:
    """The exchange with one worker process: request lines out, reply lines in (each bounded and
    checked to be a JSON mapping), and its stdout and stderr counted against its output limit."""

    def __init__(self, request_w: int, reply_r: int, output_r: int, limits: SandboxLimits):
        self.request_w, self.reply_r, self.output_r = request_w, reply_r, output_r
        self.limits = limits
        self.output_total = 0
        self.output_tail = b""
        for fd in (reply_r, output_r):
            os.set_blocking(fd, False)
        # One selector for the channel's life, not one a call: each call would open an epoll and
        # register both pipes again (an EOF on the output pipe unregisters it for good).
        self._selector = selectors.DefaultSelector()
        self._selector.register(reply_r, selectors.EVENT_READ, "reply")
        self._selector.register(output_r, selectors.EVENT_READ, "output")

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.request_w, view):]
        except BrokenPipeError:
            raise Gone() from None

    def receive(self, op: str, seconds: float, answer: Callable[[dict], None]) -> dict:
        """The reply to `op`; a request the worker makes meanwhile goes to `answer(message)`, and
        the time it takes is not counted against `seconds`."""
        deadline = time.monotonic() + seconds
        buf = bytearray()
        limit = self.limits.message_mb * 1024 * 1024
        sel = self._selector
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxFailure("timeout", f"'{op}' took longer than {seconds:g}s")
            for key, _ in sel.select(remaining):
                chunk = _read(key.fd)
                if key.data == "output":
                    if chunk is None:
                        sel.unregister(key.fd)
                    else:
                        self._take_output(chunk)
                    continue
                if chunk is None:
                    raise Gone()
                buf += chunk
                if len(buf) > limit:
                    raise SandboxFailure("protocol", f"reply to '{op}' is larger than {self.limits.message_mb} MB")
                if buf.endswith(b"\n"):
                    try:  # the one bounded JSON reader: nesting, integer lengths
                        # integers as long as Python reads: replies.py says which field is too long
                        message = safe_io.parse_json(buf.decode("utf-8"), f"reply to {op!r}", finite=False,
                                                     digits=PYTHON_INT_DIGITS)
                    except (LocatedError, UnicodeDecodeError) as e:
                        deep = isinstance(e, LocatedError) and e.problem.found == "deeper nesting"
                        what = "nested too deep" if deep else "not JSON"
                        raise SandboxFailure("protocol", f"reply to '{op}' is {what}") from None
                    if not isinstance(message, dict):
                        raise SandboxFailure("protocol", f"reply to '{op}': expected a mapping, found "
                                                         f"{type(message).__name__}")
                    if "request" not in message:
                        return message
                    started = time.monotonic()
                    answer(message)
                    deadline += time.monotonic() - started
                    buf.clear()

    def _take_output(self, chunk: bytes) -> None:
        self.output_total += len(chunk)
        self.output_tail = (self.output_tail + chunk)[-OUTPUT_TAIL:]
        if self.output_total > self.limits.output_kb * 1024:
            raise SandboxFailure("output_limit", f"printed more than {self.limits.output_kb} KB")

    def drain_output(self) -> None:
        """Read what the worker printed and is waiting in the pipe (kept in the tail, not counted)."""
        while (chunk := _read(self.output_r)):
            self.output_tail = (self.output_tail + chunk)[-OUTPUT_TAIL:]

    def output_text(self) -> str:
        return self.output_tail.decode("utf-8", "replace")

    def end_requests(self) -> None:
        os.close(self.request_w)

    def close(self) -> None:
        self._selector.close()
        for fd in (self.reply_r, self.output_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _read(fd: int) -> bytes | None:
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""
    return chunk or None
