"""Typed failures: everything that can go wrong in a worker ends as one of these."""
from __future__ import annotations

import signal
from dataclasses import asdict, dataclass

from envforge.pipeline.errors import InfrastructureError
from envforge.pipeline.sandbox.limits import EXIT_ALARM, EXIT_CPU, SandboxLimits

KINDS = {
    "exception": "the environment's code raised",
    "timeout": "a call took longer than its wall-clock limit",
    "safety_stop": "a generator or validator call ran past its wall-clock safety stop (generator_seconds)",
    "wall_clock": "an episode or a run took longer than its wall-clock budget",
    "cpu_limit": "the worker used up its CPU seconds",
    "memory": "the worker ran out of its memory limit",
    "disk_quota": "the worker wrote more than its disk quota (bytes or files) into its folder and tmp",
    "exit": "the environment ended the worker process",
    "crash": "the worker died from a signal",
    "output_limit": "the worker printed more than its output limit",
    "not_json": "the environment returned data that is not plain JSON",
    "invalid_reward": "reward is not a finite number",
    "protocol": "the worker broke the message protocol",
    "load": "the environment could not be loaded",
    "usage": "the parent asked for something the environment does not have",
    "interface": "the environment's validator or generator has a shape envforge cannot call",
}


@dataclass
class SandboxFailure(Exception):
    kind: str
    detail: str
    where: str = ""  # "env_main.py:42" when known
    output: str = ""  # tail of the worker's stdout/stderr
    op: str = ""

    def __post_init__(self):
        super().__init__(str(self))

    def __str__(self) -> str:
        loc = f"{self.where}: " if self.where else ""
        return f"{loc}{self.kind}: {self.detail}"

    def to_dict(self) -> dict:
        return asdict(self)


class WorkerStartFailed(InfrastructureError):
    """A sandbox worker did not start: it did not report ready within its start-up limit
    (SandboxLimits.start_seconds), or died or broke the protocol before it did. Only envforge's own
    code runs before that (spawn, confinement, imports), so this is an infrastructure fault, never a
    verdict on the environment or agent the worker was to hold: no caller turns it into one."""


def failure_of(reply: dict, op: str, output: str = "") -> SandboxFailure:
    """The failure a worker reported in `reply` ({"ok": false, "kind", "detail", "where"}); its
    fields are the worker's word, so each is checked and bounded (one line: a line break in an
    exception's message would print a line of its own, `FAILED: …` or `ok: …`), and an unknown
    kind is the worker breaking the protocol."""
    kind, detail, where = (reply.get(k) for k in ("kind", "detail", "where"))
    if reply.get("ok") is not False or kind not in KINDS or not isinstance(detail, str):
        return SandboxFailure("protocol", f"reply to '{op}': expected ok true with a result, or ok false "
                                          f"with a known kind and a detail, found {_keys(reply)}", "", output, op)
    where = where if isinstance(where, str) else ""
    return SandboxFailure(kind, _cut(detail, MAX_DETAIL), _cut(where, 200), output, op)


def exit_failure(code: int | None, op: str, limits: SandboxLimits) -> SandboxFailure:
    """The failure a worker's exit status `code` (negative: the signal that killed it) means, when
    it ended during `op`."""
    if code == EXIT_ALARM:
        return SandboxFailure("timeout", f"'{op}' outlived the worker's own deadline")
    if code == EXIT_CPU or code == -signal.SIGXCPU:
        return SandboxFailure("cpu_limit", f"used more than {limits.cpu_seconds}s of CPU during '{op}'")
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        if -code == signal.SIGKILL:
            return SandboxFailure("crash", f"killed by SIGKILL during '{op}' (CPU or memory limit)")
        return SandboxFailure("crash", f"died from {name} during '{op}'")
    return SandboxFailure("exit", f"worker process exited with status {code} during '{op}'")


MAX_DETAIL = 4000


def _cut(text: str, limit: int) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def _keys(reply: dict) -> str:
    return "{" + ", ".join(f"{str(k)[:20]}: {type(v).__name__}" for k, v in list(reply.items())[:6]) + "}"
