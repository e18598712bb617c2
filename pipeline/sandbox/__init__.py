"""Untrusted code runs here: sandboxed worker processes driven over a message protocol.

Use them through the typed client (pipeline/sandbox/client.py), which checks every reply:

    with EnvClient.open("generated_envs/reference/crate_dock", max_steps=30) as env:
        env.reset(Level.parse("levels/level_01.yaml"))
        env.step({"action": "move", "params": {"direction": "north"}})
"""
from pipeline.sandbox.capabilities import capabilities
from pipeline.sandbox.failures import SandboxFailure
from pipeline.sandbox.limits import Limits
from pipeline.sandbox.pool import WorkerPool
from pipeline.sandbox.process import Worker

__all__ = ["Worker", "WorkerPool", "Limits", "SandboxFailure", "capabilities"]
