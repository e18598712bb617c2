"""Untrusted code runs here: sandboxed worker processes driven over a message protocol.

    with Worker("generated_envs/reference/crate_dock") as w:
        w.call("reset", level="levels/level_01.yaml")
        w.call("step", action={"action": "move", "params": {"direction": "north"}})
"""
from pipeline.sandbox.capabilities import capabilities
from pipeline.sandbox.failures import SandboxFailure
from pipeline.sandbox.limits import Limits
from pipeline.sandbox.pool import WorkerPool
from pipeline.sandbox.process import Worker

__all__ = ["Worker", "WorkerPool", "Limits", "SandboxFailure", "capabilities"]
