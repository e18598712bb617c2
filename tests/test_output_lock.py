"""One process per output folder: a second `generate`, `evaluate` or `learn` on an --out that a
running one holds is refused in one line (an flock on OUT/.envforge.lock), and the first one
finishes as if alone. Two processes each time: the first the installed command, the second this
test process (cli_kit.envforge runs it in process; the lock is another process's either way).
The first runs a short workload that is still at work when the second comes: evaluate's agent
waits for the test's word, generate and learn run for seconds on replayed model calls."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_kit import envforge

ROOT = Path(__file__).resolve().parent.parent
ENVFORGE = str(Path(sys.executable).parent / "envforge")
REFERENCE = ROOT / "generated_envs" / "reference"
LOCK = ".envforge.lock"


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_AUTH_TOKEN"))}
    env.update(ENVFORGE_CACHE=str(tmp / "cache.sqlite"), ENVFORGE_DOTENV=str(tmp / ".env"))
    return env


def _first(tmp: Path, out: Path, *args: str) -> subprocess.Popen:
    """Start a run and wait until it holds its output folder."""
    proc = subprocess.Popen([ENVFORGE, *args], cwd=ROOT, env=_env(tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not ((out / LOCK).is_file() and (out / LOCK).read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first run never took its output folder"
        time.sleep(0.05)
    return proc


def _second(tmp: Path, command: str, first: subprocess.Popen, *args: str) -> None:
    done = envforge(*args, cwd=ROOT, home=tmp)
    assert first.poll() is None, "the first run ended before the second one started"
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"expected no other envforge run using it, found envforge {command} (process {first.pid})" in done.stderr


def _finishes(first: subprocess.Popen) -> None:
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, out[-2000:] + err[-2000:]


# A user's agent (it runs in the envforge process; the environment in the sandbox) that waits for the
# test's word, then plays the episode out: the first evaluate holds its --out until the test says so.
WAITING_AGENT = """
import os, time
def run(env, env_info):
    env.reset(mode='load', world_id=env_info['world_id'])
    while not os.path.exists({gate!r}):
        time.sleep(0.05)
    while not env.done():
        env.step({{'action': 'move', 'params': {{'direction': 'up'}}}})
"""


@pytest.mark.slow
def test_a_second_evaluate_on_the_same_out_is_refused(tmp_path):
    out, gate = tmp_path / "ev", tmp_path / "go"
    agent = tmp_path / "waiting.py"
    agent.write_text(WAITING_AGENT.format(gate=str(gate)))
    first = _first(tmp_path, out, "evaluate", str(REFERENCE / "crate_dock"), "--agent", f"{agent}:run",
                   "--max-levels", "1", "--runs", "1", "--out", str(out))
    _second(tmp_path, "evaluate", first, "evaluate", str(REFERENCE), "--agent", "random", "--out", str(out), "--resume")
    gate.touch()
    _finishes(first)
    assert {json.loads(line)["agent"] for line in (out / "episodes.jsonl").read_text().splitlines()} == {"waiting:run"}


def _verdicts(out: Path) -> tuple[set[str], set[str]]:
    """The themes a generate run in `out` accepted, and those it rejected."""
    accepted = {p.name for p in out.iterdir() if (p / "manifest.json").is_file()}
    return accepted, {p.name for p in (out / "_rejected").iterdir()}


@pytest.mark.slow
def test_a_second_generate_resume_on_the_same_out_is_refused(tmp_path, generate_demo):
    out = tmp_path / "gen"
    # two of the demo's themes, one it accepts and one it rejects: seconds of work on replayed calls
    lines = (ROOT / "examples" / "themes.txt").read_text().splitlines()
    themes = tmp_path / "themes.txt"
    themes.write_text(f"{lines[0]}\n{lines[2]}\n")
    first = _first(tmp_path, out, "generate", "--themes", str(themes), "--provider", "replay", "--out", str(out))
    _second(tmp_path, "generate", first, "generate", "--themes", str(themes), "--provider", "replay", "--out",
            str(out), "--resume")
    _finishes(first)
    accepted, rejected = _verdicts(out)
    assert len(accepted) == 1 and len(rejected) == 1 and not accepted & rejected
    # as if alone: each theme has the verdict the session's one run of the whole demo gave it (conftest.py)
    alone_accepted, alone_rejected = _verdicts(generate_demo.out)
    assert accepted <= alone_accepted and rejected <= alone_rejected


@pytest.mark.slow
def test_a_second_learn_on_the_same_out_is_refused(tmp_path):
    out = tmp_path / "study"
    # one environment, one method, one iteration: seconds of work on the learn demo's replayed calls
    first = _first(tmp_path, out, "learn", str(REFERENCE / "crate_dock"), "--provider", "replay", "--methods",
                   "best-dynamics-prompt", "--iterations", "1", "--out", str(out))
    _second(tmp_path, "learn", first, "learn", "--resume", "--provider", "replay", "--out", str(out))
    _finishes(first)
    assert (out / "report" / "table5.md").is_file()
