"""examples/notebook.py, run as a user runs it: envforge.make, a seeded episode, Gymnasium's
checker and the random and planner agents through the Python API, inside a running event loop."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent


def test_notebook_example_runs_inside_an_event_loop(tmp_path, generate_demo):
    # The notebook's last cell resumes runs/api-demo (resume=True, as running the cell again does):
    # it starts from a copy of the session's one run of the demo (conftest.py), so the API reads back
    # the finished themes; a fresh generate through the API is test_envforge_api.py's.
    generate_demo.copy_to(tmp_path / "runs" / "api-demo")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ENVFORGE_MODEL")}
    env.update(ENVFORGE_CACHE=str(tmp_path / "cache.sqlite"), ENVFORGE_DOTENV=str(tmp_path / ".env"))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "notebook.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "crate_dock: 10 test levels, max_steps 30" in out
    assert re.search(r"episode: \d+ steps, total reward [\d.]+, terminated=(True|False), truncated=(True|False)", out)
    assert "check_env: passed" in out
    assert re.search(r"random: mean normalized reward [01]\.\d{3} over 2 episodes", out)
    assert "planner: mean normalized reward 1.000 over 2 episodes; stops: ['solved', 'solved']" in out
    # the README snippet's parts too (issue 23: the example lacked session() and generate())
    assert "session: reward 0, terminated=False, truncated=False" in out
    assert ("generate: accepted ['a_lighthouse_keeper_must_keep_three_962115', 'a_robot_in_a_dark_server_2ea2c6'], "
            "rejected ['a_card_game_of_higher_or_lower_against_406967']") in out
    assert "RuntimeError" not in done.stderr  # no "asyncio.run() cannot be called from a running event loop"
