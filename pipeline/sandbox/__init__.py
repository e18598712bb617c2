"""Untrusted code runs here: sandboxed worker processes driven over a message protocol.

The trust boundary is the tree:

  outside/   runs in envforge's own process (holds the keys): starts, feeds, bounds and kills
             workers, and treats every reply as hostile input (client, pool, executor, remote,
             process, folder, replies, failures, capabilities).
  inside/    runs in the confined worker process, beside model-written code: the worker's entry,
             its confinement (confine, syscalls, landlock) and what answers requests there
             (host, agent_host, search, adapters, faults, rngs). Nothing in it holds a key.
  limits.py  read by both sides: the worker's limits, its exit statuses and its environment.
  protocol.py  what both sides agree on: the worker's entry module, the operations, the shapes
             of requests and replies, and the one dispatch (`Dispatcher.handle`) of both hosts.

Use workers through the typed client (pipeline/sandbox/outside/client.py), which checks every reply:

    with EnvClient.open(EnvSpec.open("generated_envs/reference/crate_dock")) as env:
        env.reset(Level.parse("levels/level_01.yaml"))
        env.step({"action": "move", "params": {"direction": "north"}})
"""
from typing import TYPE_CHECKING

from envforge.pipeline.lazy import exports

if TYPE_CHECKING:
    from envforge.pipeline.sandbox.limits import SandboxLimits
    from envforge.pipeline.sandbox.outside.capabilities import capabilities
    from envforge.pipeline.sandbox.outside.failures import SandboxFailure, WorkerStartFailed
    from envforge.pipeline.sandbox.outside.pool import WorkerPool
    from envforge.pipeline.sandbox.outside.process import Worker

# name -> the module defining it, imported on first use (PEP 562): every sandbox worker imports this
# package (its entry is pipeline.sandbox.inside.worker), and the host side (outside/: the process,
# pool and executor code, subprocess, the capability probes) cost it about 0.05 CPU-seconds a start.
__getattr__ = exports(__name__, {"SandboxLimits": "limits", "capabilities": "outside.capabilities",
                                 "SandboxFailure": "outside.failures", "WorkerStartFailed": "outside.failures",
                                 "WorkerPool": "outside.pool", "Worker": "outside.process"})

__all__ = ["Worker", "WorkerPool", "SandboxLimits", "SandboxFailure", "WorkerStartFailed", "capabilities"]
