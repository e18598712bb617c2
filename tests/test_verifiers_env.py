"""envforge environments as verifiers environments: `envforge export verifiers`, then verifiers' own
`vf-eval` against the loopback OpenAI-compatible server, scored as `envforge evaluate` scores the
same scripted actions (the model's replies depend only on the step number in the prompt)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="the verifiers extra is not installed (pip install 'envforge-rl[verifiers]')")

import envforge  # noqa: E402
from envforge.pipeline import layout  # noqa: E402
from envforge.pipeline.cli import main  # noqa: E402
from envforge.pipeline.testing.llm_server import LLMServer, Reply  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "generated_envs" / "reference"
BIN = Path(sys.executable).parent
STEP = re.compile(r"This is step (\d+) of at most")
pytestmark = pytest.mark.slow


def crate_dock_solution() -> list[dict]:
    """The shipped shortest solution of crate_dock's level_01 (examples/), as action dicts."""
    env = envforge.open(REFERENCE / "crate_dock")
    lines = (ROOT / "examples" / "crate_dock_level_01.actions").read_text().splitlines()
    return [env.parse_action(line) for line in lines if line.strip() and not line.startswith("#")]


def walk(env_dir: Path) -> list[dict]:
    """A fixed walk over the environment's declared actions: some steps valid, some not."""
    candidates = envforge.open(env_dir).spec.actions.candidates()
    return [candidates[(7 * k + 3) % len(candidates)] for k in range(200)]


@pytest.fixture
def scripted(llm_env, monkeypatch):
    """A loopback model that answers step K of any episode with the script's K-th action, in the
    ReAct agent's <action> tags: evaluate's ReAct agent and the verifiers env read the same one."""
    server = LLMServer().start()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")

    def play(script: list[dict]) -> LLMServer:
        def rule(n):
            prompt = json.dumps(server.requests[-1]["body"].get("messages", []))
            steps = STEP.findall(prompt)
            k = int(steps[-1]) if steps else 1
            return Reply(f"Next.\n<action>{json.dumps(script[(k - 1) % len(script)])}</action>")
        server.rule = rule
        return server

    yield play
    server.stop()


def evaluate_normalized(env_dir: Path, server: LLMServer, out: Path, levels: int) -> dict[str, float | None]:
    assert main(["evaluate", str(env_dir), "--agent", "react", "--model", "openai/gpt-4o-mini", "--base-url",
                 server.openai_url, "--max-levels", str(levels), "--runs", "1", "--out", str(out)]) in (0, 1)
    rows = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert all(r["normalized"] is not None for r in rows), rows  # scored: no model or environment failure
    return {r["level"]: r["normalized"] for r in rows}


def vf_eval(env_dir: Path, server: LLMServer, tmp: Path, levels: int) -> dict[str, float]:
    """`envforge export verifiers`, then verifiers' own evaluation command on the exported module."""
    exported = tmp / "exported"
    assert main(["export", "verifiers", str(env_dir), "--out", str(exported)]) == 0
    (project,) = exported.iterdir()
    module = project.name
    assert 'dependencies = ["envforge-rl[verifiers]' in (project / "pyproject.toml").read_text()
    env = dict(os.environ, PYTHONPATH=str(project), NO_PROXY="127.0.0.1,localhost")
    done = subprocess.run([str(BIN / "vf-eval"), module, "-a", json.dumps({"max_levels": levels}), "-m", "gpt-4o-mini",
                           "-b", server.openai_url, "-k", "OPENAI_API_KEY", "-n", str(levels), "-r", "1", "-s",
                           "-o", str(tmp / "vf")], cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (results,) = (tmp / "vf").rglob("results.jsonl")
    rows = [json.loads(x) for x in results.read_text().splitlines()]
    assert all(r["error"] is None for r in rows), rows
    return {(r["info"] if isinstance(r["info"], dict) else json.loads(r["info"]))["level"]: r["reward"] for r in rows}


@pytest.mark.parametrize("name", ["crate_dock", "tide_pool", "demo"])
def test_vf_eval_rewards_equal_evaluates_normalized_rewards(name, scripted, tmp_path, request):
    """Two reference environments (crate_dock played by its shipped solution, tide_pool by a fixed
    walk) and an environment the offline demo accepted (a fixed walk)."""
    if name == "demo":
        run = request.getfixturevalue("generate_demo")
        accepted = layout.find_envs(run.out)
        assert accepted, run.stdout[-2000:]
        env_dir = accepted[0].path
    else:
        env_dir = REFERENCE / name
    server = scripted(crate_dock_solution() if name == "crate_dock" else walk(env_dir))
    expected = evaluate_normalized(env_dir, server, tmp_path / "evaluate", levels=2)
    got = vf_eval(env_dir, server, tmp_path, levels=2)
    assert set(got) == set(expected) and len(got) == 2
    for level, normalized in expected.items():
        assert got[level] == pytest.approx(normalized, abs=1e-9), (level, got, expected)
    if name == "crate_dock":
        assert got["levels/level_01.yaml"] == 1.0  # the shipped solution solves level_01 in both
