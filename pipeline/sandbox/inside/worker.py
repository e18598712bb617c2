"""Entry point of a sandbox worker process: confine, then answer requests until EOF.

Started only by pipeline.sandbox.outside.process.Worker (as `python -m protocol.WORKER_MODULE`).
Requests and replies are JSON lines on two inherited pipes (not stdin/stdout, which the
environment may print to); their shapes are pipeline/sandbox/protocol.py's. A worker first
confines itself and makes its host, then writes `protocol.STARTED` unasked: up to there it runs
envforge's code only, under the parent's start-up limit. Then it answers requests, the first of
which loads what it holds (`protocol.OPENING`: the environment's code, under the call limit).
While handling a request, a host may ask the parent for something (`ask`): it writes a request
line on the reply pipe and reads the parent's answer from the request pipe before it goes on.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
from types import SimpleNamespace

from envforge.pipeline.sandbox import protocol
from envforge.pipeline.sandbox.limits import EXIT_ALARM, SandboxLimits

# A worker enforces its own deadline too, a little after the parent's, so that a worker
# whose parent was killed mid-call does not run on forever.
GRACE_SECONDS = 5


FLAGS = ("base", "folder", "mode", "uid", "fds", "limits", "host")  # as process.Worker writes them


def _flags(argv: list[str]) -> SimpleNamespace:
    """The worker's `--name value` flags, as process.Worker writes them (no command-line parser is
    loaded into the worker: it parses the one shape it is started with, or stops)."""
    names = [a[2:] for a in argv[::2]]
    if len(argv) % 2 or any(not a.startswith("--") for a in argv[::2]) or len(set(names)) != len(names) \
            or not set(names) <= set(FLAGS) or not set(FLAGS[:6]) <= set(names):
        raise SystemExit(f"envforge sandbox worker: expected the flags --{' --'.join(FLAGS[:6])} (and --host), "
                         f"each with a value, found {argv!r}")
    flags = SimpleNamespace(**{"host": "env", **dict(zip(names, argv[1::2]))})
    if flags.host not in protocol.HOSTS or not flags.uid.lstrip("-").isdigit():
        raise SystemExit(f"envforge sandbox worker: expected --host {'|'.join(protocol.HOSTS)} and a numeric "
                         f"--uid, found {argv!r}")
    flags.uid = int(flags.uid)
    return flags


def main() -> None:
    from envforge.pipeline.sandbox.inside import agent_host, confine, host

    args = _flags(sys.argv[1:])
    request_fd, reply_fd = (int(x) for x in args.fds.split(","))
    limits = SandboxLimits(**json.loads(args.limits))
    env_dir = confine.confine(args.mode, args.base, args.folder, args.uid, limits)
    signal.signal(signal.SIGALRM, lambda *_: os._exit(EXIT_ALARM))
    with os.fdopen(request_fd, "rb") as requests:
        def ask(kind: str, payload: dict):
            """The parent's answer to a request; the deadline of the call waits meanwhile."""
            left = signal.alarm(0)
            _write(reply_fd, (json.dumps({"request": kind, "args": payload}, allow_nan=False) + "\n").encode())
            line = requests.readline()
            signal.alarm(left or 1)
            if not line:
                os._exit(0)  # the parent is gone
            return json.loads(line).get("answer")

        env_host = agent_host.AgentHost(env_dir, ask) if args.host == "agent" else host.EnvHost(env_dir)

        def answer(request: dict) -> None:
            signal.alarm(math.ceil(request.get("timeout") or limits.call_seconds) + GRACE_SECONDS)
            _back_to(env_dir)
            reply = env_host.handle(request)
            signal.alarm(0)
            _write(reply_fd, protocol.encode(reply))

        _write(reply_fd, protocol.encode(protocol.STARTED))  # confined and ready: no env code has run yet
        for line in requests:
            try:
                request = json.loads(line)
            except ValueError:
                _write(reply_fd, protocol.encode(protocol.failure_reply("protocol", "request is not JSON")))
            else:
                answer(request)


def _back_to(env_dir: str) -> None:
    """Every call starts in the environment's folder, wherever the last one left the process."""
    with contextlib.suppress(OSError):
        os.chdir(env_dir)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    main()
