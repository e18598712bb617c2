"""One process per output folder: a second `generate`, `evaluate` or `learn` on an --out that a
running one holds is refused in one line (an flock on OUT/.envforge.lock), and the first one
finishes as if alone. Two real processes each time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENVFORGE = str(Path(sys.executable).parent / "envforge")
REFERENCE = ROOT / "generated_envs" / "reference"
ENVS = sorted(str(p) for p in REFERENCE.iterdir() if p.is_dir())
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
    done = subprocess.run([ENVFORGE, *args], cwd=ROOT, env=_env(tmp), capture_output=True, text=True, timeout=300)
    assert first.poll() is None, "the first run ended before the second one started"
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"expected no other envforge run using it, found envforge {command} (process {first.pid})" in done.stderr
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, out[-2000:] + err[-2000:]


@pytest.mark.slow
def test_a_second_evaluate_on_the_same_out_is_refused(tmp_path):
    out = tmp_path / "ev"
    first = _first(tmp_path, out, "evaluate", str(REFERENCE), "--agent", "planner", "--out", str(out))
    _second(tmp_path, "evaluate", first, "evaluate", str(REFERENCE), "--agent", "random", "--out", str(out), "--resume")
    assert {json.loads(line)["agent"] for line in (out / "episodes.jsonl").read_text().splitlines()} == {"planner"}


@pytest.mark.slow
def test_a_second_generate_resume_on_the_same_out_is_refused(tmp_path):
    out = tmp_path / "gen"
    themes = str(ROOT / "examples" / "themes.txt")
    first = _first(tmp_path, out, "generate", "--themes", themes, "--provider", "replay", "--out", str(out))
    _second(tmp_path, "generate", first, "generate", "--themes", themes, "--provider", "replay", "--out", str(out),
            "--resume")
    accepted = {p.name for p in out.iterdir() if (p / "manifest.json").is_file()}
    rejected = {p.name for p in (out / "_rejected").iterdir()}
    assert len(accepted) == 2 and len(rejected) == 1 and not accepted & rejected


@pytest.mark.slow
def test_a_second_learn_on_the_same_out_is_refused(tmp_path):
    out = tmp_path / "study"
    first = _first(tmp_path, out, "learn", *ENVS, "--provider", "replay", "--methods", "all", "--iterations", "2",
                   "--out", str(out))
    _second(tmp_path, "learn", first, "learn", "--resume", "--provider", "replay", "--out", str(out))
