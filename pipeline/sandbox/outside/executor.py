"""Where sandboxed work runs: on this machine (`local`, the default) or on a Ray cluster (`ray`).

The one place that starts a sandbox worker for an environment (`open_worker`). With `ray`, the
CPU-bound sandboxed work — episode steps, verification's searches, level certification,
candidate evaluation — runs in workers on the cluster's nodes (pipeline.sandbox.outside.remote), each
node with its own workers and the same confinement. Everything else stays in this process:
model calls (the keys are here), learned agents' own workers (they ask this process for model
calls mid-call), and every record, written by this process alone.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.sandbox.outside.folder import FolderCopy
from pipeline.sandbox.limits import Limits
from pipeline.sandbox.outside.process import Worker

KINDS = ("local", "ray")


@dataclass
class Executor:
    kind: str = "local"
    address: str | None = None


_current = Executor()


def current() -> Executor:
    return _current


def use(kind: str = "local", address: str | None = None) -> Executor:
    """Choose where this process's sandboxed work runs (commands call this once, from flags)."""
    global _current
    if kind not in KINDS:
        raise ValueError(f"executor: expected one of {', '.join(KINDS)}, found {kind!r}")
    if kind == "ray":
        from pipeline.sandbox.outside import remote

        remote.connect(address)
        _current = Executor("ray", address)
    else:
        _current = Executor()
    return _current


def open_worker(env_dir: str | Path, limits: Limits | None = None, env_id: Any = None,
                skin: str | None = None, host: str = "env", folder: FolderCopy | None = None):
    """A loaded sandbox worker holding `env_dir` (`folder`: a copy of it to share): here, or on a
    cluster node with `ray`."""
    if _current.kind == "ray" and host == "env":
        from pipeline.sandbox.outside.remote import RayWorker

        return RayWorker(env_dir, limits, env_id=env_id, skin=skin, folder=folder)
    return Worker(env_dir, limits, env_id=env_id, skin=skin, host=host, folder=folder)


# Plays of one piece of sandboxed work after the first, when the node running it is lost.
INFRASTRUCTURE_RETRIES = 2


def infrastructure_errors() -> tuple[type[BaseException], ...]:
    """Failures of the machinery, not of an environment: a caller retries the work elsewhere."""
    if _current.kind != "ray":
        return ()
    from pipeline.sandbox.outside.remote import NodeLost

    return (NodeLost,)


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("executor")
    g.add_argument("--executor", choices=KINDS, default="local",
                   help="where sandboxed work runs: this machine (local, default) or the nodes of a Ray "
                        "cluster (ray; pip install 'envforge[ray]'). Model calls and records stay here")
    g.add_argument("--ray-address", metavar="ADDRESS",
                   help="the Ray cluster to join (auto, HOST:PORT or ray://HOST:PORT; default "
                        "$ENVFORGE_RAY_ADDRESS, else a new cluster on this machine)")


def use_from_args(args: argparse.Namespace) -> Executor:
    if args.ray_address and args.executor != "ray":
        from pipeline.errors import UserError

        raise UserError(f"--ray-address {args.ray_address}: expected --executor ray with it, found --executor "
                        f"{args.executor}")
    return use(args.executor, args.ray_address)
