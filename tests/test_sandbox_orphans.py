"""A killed envforge process leaves nothing running for long, and its folders are swept."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from envforge.pipeline.sandbox import Worker, capabilities
from envforge.pipeline.testing.tiny_env import write_env

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(capabilities()["mode"] != "namespaces", reason="needs root and unshare")]

DRIVER = """
import sys
from envforge.pipeline.sandbox import SandboxLimits, Worker
w = Worker(sys.argv[1], SandboxLimits(call_seconds=3))
print(w.base, flush=True)
w.call("reset", level="levels/level_01.yaml")
w.call("step", action={"action": "move", "params": {"direction": "right"}})
"""


def _worker_processes(base: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if base in line and "envforge.pipeline.sandbox.inside.worker" in line]


def test_worker_of_a_killed_parent_dies_by_its_own_deadline_and_its_folder_is_swept(tmp_path):
    env = write_env(tmp_path / "sleepy", replace={"env_main.py": (
        "name, params = action.get", "__import__('time').sleep(600)\n        name, params = action.get")})
    parent = subprocess.Popen([sys.executable, "-c", DRIVER, str(env)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    base = parent.stdout.readline().strip()
    time.sleep(1.0)  # the step is now sleeping in the worker
    assert _worker_processes(base), parent.stderr.read() if parent.poll() is not None else "not running"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 3 + 5 + 5  # call limit + the worker's grace + slack
    while _worker_processes(base) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _worker_processes(base) == []
    # Its folder stays until an envforge process starts a worker (any one: on a busy machine
    # another process may sweep it first).
    with Worker(env):
        pass
    assert not Path(base).exists()
    assert Path(tempfile.gettempdir()).is_dir()
    assert os.path.basename(base).startswith(f"envforge-sbx-{parent.pid}-")
