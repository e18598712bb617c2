"""`envforge export harbor`: one Harbor task per level, read by Harbor's own loader and linter, and the
task's scripts run as Harbor runs them: the oracle's solution/solve.sh, then tests/test.sh, whose
reward file says 1 for the level's certified witness.

No container is started (CI has no Docker daemon): a task's scripts run here with the image's paths
mapped under a folder (ENVFORGE_HARBOR_ROOT), the files put there as the task's Dockerfile COPYs
them and its ENV PATH names. Harbor itself needs Python 3.12 or later, so its loader runs in a
Python of its own: this one when it has harbor, else ENVFORGE_HARBOR_PYTHON; the test says it
skipped when neither has it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cli_kit import REFERENCE

from envforge.pipeline.api.harbor import EPISODE, RECORD, REWARD, ROOT_VARIABLE
from envforge.pipeline.cli import main

pytestmark = pytest.mark.slow

CRATE_DOCK = REFERENCE / "crate_dock"
DIGEST = "python:3.11-slim@sha256:" + "0" * 64


def export(tmp: Path, *env_dirs: Path, extra: tuple[str, ...] = ()) -> list[Path]:
    out = tmp / "tasks"
    assert main(["export", "harbor", *map(str, env_dirs), "--out", str(out), *extra]) == 0
    return sorted(out.iterdir())


def image(task: Path, root: Path) -> dict[str, str]:
    """The task's image, without a container: environment/'s files put under `root` as its Dockerfile
    COPYs them, Harbor's /solution and /tests beside them; the environment its scripts run in (the
    Dockerfile's ENV PATH, this Python's envforge, the paths mapped under `root`)."""
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    copies = re.findall(r"^COPY (\S+) (\S+)$", dockerfile, flags=re.M)
    assert ("envforge/", "/envforge/") in copies
    for source, target in copies:
        if not source.startswith("wheels"):
            shutil.copytree(task / "environment" / source, root / target.strip("/"), dirs_exist_ok=True)
    shutil.copytree(task / "solution", root / "solution")
    shutil.copytree(task / "tests", root / "tests")
    (path,) = re.findall(r'^ENV PATH="([^"$]+):\$PATH"$', dockerfile, flags=re.M)
    search = [str(root / path.strip("/")), str(Path(sys.executable).parent), os.environ["PATH"]]
    return {**os.environ, ROOT_VARIABLE: str(root), "PATH": os.pathsep.join(search)}


def run(script: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args] if script.suffix == ".sh" else [str(script), *args], env=env,
                          capture_output=True, text=True, timeout=600)


def reward(root: Path) -> str:
    return (root / REWARD.lstrip("/")).read_text().strip()


def test_each_level_is_a_task_whose_oracle_solution_scores_one_through_its_own_test(tmp_path):
    tasks = export(tmp_path, CRATE_DOCK)
    assert [t.name for t in tasks] == [f"crate_dock-level_{i:02d}" for i in range(1, 11)]
    task = tasks[1]  # level_02: an 8-step witness
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["task"]["name"] == "envforge/crate_dock-level_02"
    assert config["metadata"]["level"] == "levels/level_02.yaml" and config["metadata"]["max_reward"] == 1.0
    assert config["verifier"]["environment_mode"] == "separate" and config["agent"]["user"] == "agent"
    witness = json.loads((CRATE_DOCK / "level_max_rewards.json").read_text())["levels"]["level_02.yaml"]["witness"]
    solve = (task / "solution" / "solve.sh").read_text()
    played = [line for line in solve.splitlines() if line.startswith("envforge-play ")]
    assert len(played) == len(witness) == config["metadata"]["oracle_steps"]
    instruction = (task / "instruction.md").read_text()
    # what envforge's ReAct agent is told, then the first turn's prompt
    assert instruction.startswith("==== Environment Instruction ====\n" + (CRATE_DOCK / "agent_instruction.txt")
                                  .read_text().strip()[:60])
    assert "==== Action Space ====" in instruction and "envforge-play" in instruction
    assert "==== Now, your observation is: ====" in instruction and "This is step 1 of at most 30." in instruction

    root = tmp_path / "image"
    env = image(task, root)
    solved = run(root / "solution" / "solve.sh", env)
    assert solved.returncode == 0, solved.stderr
    assert "The episode ended after 8 step(s): solved. Total reward 1." in solved.stdout
    assert len((root / EPISODE.lstrip("/")).read_text().splitlines()) == len(witness)
    scored = run(root / "tests" / "test.sh", env)
    assert scored.returncode == 0, scored.stderr
    assert reward(root) == "1"
    record = json.loads((root / RECORD.lstrip("/")).read_text())
    assert (record["env"], record["level"], record["stop_reason"], record["steps"]) == (
        "crate_dock", "levels/level_02.yaml", "solved", len(witness))
    # the episode is over: nothing more is played, and the score stands
    again = run(root / "envforge" / "bin" / "envforge-play", env, "move", "north")
    assert again.returncode == 2 and "Nothing was played: the episode is over." in again.stdout
    assert run(root / "tests" / "test.sh", env).returncode == 0 and reward(root) == "1"


def test_an_agent_that_does_not_solve_the_level_scores_what_evaluate_would(tmp_path):
    (task, *_) = export(tmp_path, CRATE_DOCK)
    root = tmp_path / "image"
    env = image(task, root)
    play = root / "envforge" / "bin" / "envforge-play"
    shown = run(play, env, "--show")
    assert shown.returncode == 0 and "This is step 1 of at most 30." in shown.stdout
    assert (root / EPISODE.lstrip("/")).read_text() == ""  # showing is no turn
    bumped = run(play, env, "move", "direction=north")  # into the wall
    assert bumped.returncode == 0 and "This is step 2 of at most 30." in bumped.stdout
    wrong = run(play, env, "fly away")
    assert wrong.returncode == 2 and "This is step 3 of at most 30." in wrong.stdout  # a format error is a turn
    assert "is not an action" in wrong.stdout
    assert run(play, env, '{"action": "wait", "params": {}}').returncode == 0
    scored = run(root / "tests" / "test.sh", env)
    assert scored.returncode == 0, scored.stderr
    assert reward(root) == "0"
    record = json.loads((root / RECORD.lstrip("/")).read_text())
    assert (record["steps"], record["format_errors"], record["stop_reason"]) == (3, 1, "agent_stopped")
    # an agent that sent nothing scores 0; a log it made unreadable is no answer either
    (root / EPISODE.lstrip("/")).write_text("not a record\n" * 3)
    assert run(root / "tests" / "test.sh", env).returncode == 0 and reward(root) == "0"


def test_a_level_without_a_witness_that_scores_its_max_is_left_out_and_said_so(tmp_path, capsys):
    env_dir = tmp_path / "crate_dock"
    shutil.copytree(CRATE_DOCK, env_dir)
    maxima = json.loads((env_dir / "level_max_rewards.json").read_text())
    del maxima["levels"]["level_01.yaml"]["witness"]
    maxima["levels"]["level_02.yaml"]["witness"] = maxima["levels"]["level_02.yaml"]["witness"][:-1]
    (env_dir / "level_max_rewards.json").write_text(json.dumps(maxima))
    tasks = export(tmp_path, env_dir)
    assert [t.name for t in tasks] == [f"crate_dock-level_{i:02d}" for i in range(3, 11)]
    err = capsys.readouterr().err
    assert "crate_dock/level_01.yaml left out of the Harbor tasks: no witness" in err
    assert "crate_dock/level_02.yaml left out of the Harbor tasks: its witness scores 0 of 1" in err


def test_a_hostile_name_and_witness_are_quoted_for_toml_and_the_shell(tmp_path):
    name = 'crate "dock"\n$(touch PWNED)'
    env_dir = tmp_path / "envs" / name
    shutil.copytree(CRATE_DOCK, env_dir)
    maxima = json.loads((env_dir / "level_max_rewards.json").read_text())
    entry = maxima["levels"]["level_02.yaml"]
    # a first action the environment counts as invalid, its parameter written to break out of the quotes
    entry["witness"] = [{"action": "move", "params": {"direction": "'; touch PWNED; echo '"}}] + entry["witness"]
    (env_dir / "level_max_rewards.json").write_text(json.dumps(maxima))
    tasks = export(tmp_path, env_dir)
    task = next(t for t in tasks if t.name.endswith("level_02"))
    assert re.fullmatch(r"[a-z0-9._-]+-level_02", task.name)
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["metadata"]["environment"] == name and name in config["task"]["description"].replace("\\n", "\n")
    root = tmp_path / "image"
    env = image(task, root)
    solved = run(root / "solution" / "solve.sh", env)
    assert solved.returncode == 0, solved.stderr
    assert run(root / "tests" / "test.sh", env).returncode == 0 and reward(root) == "1"
    assert not list(tmp_path.rglob("PWNED")) and not (Path.cwd() / "PWNED").exists()
    record = json.loads((root / RECORD.lstrip("/")).read_text())
    assert record["env"] == name and record["invalid_actions"] == 1


def test_a_wheel_is_copied_into_each_image_and_installed_from_there(tmp_path):
    wheel = tmp_path / "envforge_rl-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (task, *_) = export(tmp_path, CRATE_DOCK, extra=("--wheel", str(wheel)))
    assert (task / "environment" / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert f"pip install --no-cache-dir /tmp/envforge-wheels/{wheel.name}" in dockerfile
    assert "envforge-rl==" not in dockerfile


HARBOR_CHECK = """
import json, sys, warnings
from pathlib import Path
from harbor.lint.task import lint_task
from harbor.models.task.task import Task
from harbor.models.task.verifier_mode import resolve_task_verifier_mode
out = []
for d in sorted(Path(sys.argv[1]).iterdir()):
    task = Task(d)
    out.append({"dir": d.name, "name": task.name, "valid": Task.is_valid_dir(d), "instruction": task.instruction,
                "mode": resolve_task_verifier_mode(task.config).value, "metadata": task.config.metadata,
                "solve": str(task.paths.discovered_solve_path), "test": str(task.paths.discovered_test_path),
                "lint": sorted({f.rule.value for f in lint_task(d)})})
print(json.dumps(out))
"""


def harbor_python() -> str:
    if importlib.util.find_spec("harbor") is not None:
        return sys.executable
    if os.environ.get("ENVFORGE_HARBOR_PYTHON"):
        return os.environ["ENVFORGE_HARBOR_PYTHON"]
    pytest.skip(f"Harbor is not installed beside envforge (harbor needs Python >= 3.12, this is "
                f"{sys.version_info.major}.{sys.version_info.minor}): set ENVFORGE_HARBOR_PYTHON to a Python with "
                "harbor installed to run this test")


@pytest.mark.parametrize("base_image", ["python:3.11-slim", DIGEST])
def test_harbors_own_loader_and_linter_accept_the_tasks(tmp_path, base_image):
    python = harbor_python()
    tasks = export(tmp_path, CRATE_DOCK, REFERENCE / "tide_pool", extra=("--base-image", base_image))
    found = subprocess.run([python, "-c", HARBOR_CHECK, str(tasks[0].parent)], capture_output=True, text=True,
                           timeout=600)
    assert found.returncode == 0, found.stderr
    loaded = json.loads(found.stdout)
    assert [t["dir"] for t in loaded] == [t.name for t in tasks] and len(loaded) == 20
    for task, dir_ in zip(loaded, tasks):
        assert task["valid"] and task["name"] == f"envforge/{dir_.name}" and task["mode"] == "separate"
        assert task["instruction"] == (dir_ / "instruction.md").read_text()
        assert task["solve"].endswith("solution/solve.sh") and task["test"].endswith("tests/test.sh")
        # a digest is the one thing Harbor's lint asks that envforge cannot know offline (--base-image gives it)
        assert task["lint"] == ([] if "@sha256:" in base_image else ["unpinned-image"])
