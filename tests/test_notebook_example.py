"""examples/notebook.py, run as a user runs it: envforge.make, a seeded episode, Gymnasium's
checker and the random and planner agents through the Python API, inside a running event loop."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")

ROOT = Path(__file__).resolve().parent.parent


def test_notebook_example_runs_inside_an_event_loop(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "notebook.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "crate_dock: 10 test levels, max_steps 30" in out
    assert re.search(r"episode: \d+ steps, total reward [\d.]+, terminated=(True|False), truncated=(True|False)", out)
    assert "check_env: passed" in out
    assert re.search(r"random: mean normalized reward [01]\.\d{3} over 2 episodes", out)
    assert "planner: mean normalized reward 1.000 over 2 episodes; stops: ['solved', 'solved']" in out
    assert "RuntimeError" not in done.stderr  # no "asyncio.run() cannot be called from a running event loop"
