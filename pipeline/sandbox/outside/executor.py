"""Where sandboxed work runs: on this machine (`local`, the default) or on a Ray cluster (`ray`).

The one place that starts a sandbox worker for an environment (`open_worker`). With `ray`, the
CPU-bound sandboxed work — episode steps, verification's searches, level certification,
candidate evaluation — runs in workers on the cluster's nodes (pipeline.sandbox.outside.remote), each
node with its own workers and the same confinement. Everything else stays in this process:
model calls (the keys are here), learned agents' own workers (they ask this process for model
calls mid-call), and every record, written by this process alone.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside.folder import FolderCopy
from envforge.pipeline.sandbox.outside.process import Worker

KINDS = ("local", "ray")


@dataclass(frozen=True)
class Executor:
    kind: str = "local"
    address: str | None = None

    def start(self) -> "Executor":
        """Ready to run work: with `ray`, the cluster joined (or a local one started) now, before
        the call writes anything (a UserError when it cannot be reached)."""
        if self.kind not in KINDS:
            raise ValueError(f"executor: expected one of {', '.join(KINDS)}, found {self.kind!r}")
        if self.kind == "ray":
            from envforge.pipeline.sandbox.outside import remote

            remote.connect(self.address)
        return self


LOCAL = Executor()

# The executor of the library call in progress (`running_on`): a call's option, in force for the
# call's own thread and the tasks and threads it starts (asyncio tasks and `asyncio.to_thread`
# copy it; a WorkerPool keeps the one it was made under). Outside any call: this machine.
_running_on: contextvars.ContextVar[Executor] = contextvars.ContextVar("envforge_executor", default=LOCAL)


def current() -> Executor:
    return _running_on.get()


@contextlib.contextmanager
def running_on(executor: Executor) -> Iterator[Executor]:
    """Run the sandboxed work started inside the block on `executor` (a library call's option;
    `ray` joins or starts the cluster first, if not done yet)."""
    token = _running_on.set(executor.start())
    try:
        yield executor
    finally:
        _running_on.reset(token)


def open_worker(env_dir: str | Path, limits: SandboxLimits | None = None, env_id: Any = None,
                skin: str | None = None, host: str = "env", folder: FolderCopy | None = None,
                executor: Executor | None = None):
    """A loaded sandbox worker holding `env_dir` (`folder`: a copy of it to share): here, or on a
    cluster node with `ray` (`executor`, else the one of the call in progress)."""
    if (executor or current()).kind == "ray" and host == "env":
        from envforge.pipeline.sandbox.outside.remote import RayWorker

        return RayWorker(env_dir, limits, env_id=env_id, skin=skin, folder=folder)
    return Worker(env_dir, limits, env_id=env_id, skin=skin, host=host, folder=folder)


# Plays of one piece of sandboxed work after the first, when the node running it is lost.
INFRASTRUCTURE_RETRIES = 2


def infrastructure_errors() -> tuple[type[BaseException], ...]:
    """Failures of the machinery, not of an environment: a caller retries the work elsewhere."""
    if current().kind != "ray":
        return ()
    from envforge.pipeline.sandbox.outside.remote import NodeLost

    return (NodeLost,)
