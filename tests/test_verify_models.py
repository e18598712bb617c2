"""`envforge verify` with models: the ReAct rollout and the weak-versus-strong differential test,
against the loopback model server (real OpenAI SDK, no key, no network)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.pipeline.testing.llm_server import Reply

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = [
    ln.split()[1].split("=")[1]
    for ln in (ROOT / "examples/crate_dock_level_01.actions").read_text().splitlines()
    if ln.startswith("move")
]


def solving(n, request):
    """The 'strong' model follows level_01's shortest solution (it reads the step from the observation);
    the 'weak' one answers prose with no action."""
    if request["body"].get("model") != "strong-model":
        return Reply("I am not sure what to do here.")
    text = json.dumps(request["body"].get("messages"))
    steps = re.findall(r"Step (\d+)/30", text)
    t = int(steps[-1]) if steps else 0
    direction = SOLUTION[t] if t < len(SOLUTION) else "north"
    return Reply('<thinking_memory>follow the plan</thinking_memory>\n<action>{"action": "move", "params": '
                 f'{{"direction": "{direction}"}}}}</action>')


def verify(env_dir: Path, server, llm_env, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OPENAI_API_KEY="test-key", ENVFORGE_CACHE=str(llm_env / "c.sqlite"), NO_PROXY="127.0.0.1",
               ENVFORGE_RETRY_BASE_DELAY="0.01")
    return subprocess.run([sys.executable, "-m", "envforge", "verify", str(env_dir), "--stages", "execution",
                           "--base-url", server.openai_url, "--json", "--write", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_differential_test_accepts_a_reward_that_separates_the_models(llm_server, llm_env, tmp_path):
    env_dir = shutil.copytree(ROOT / "generated_envs/reference/crate_dock", tmp_path / "crate_dock")
    llm_server.rule = solving
    result = verify(env_dir, llm_server, llm_env, "--agent-models", "openai/weak-model,openai/strong-model",
                    "--agent-runs", "1", "--agent-levels", "1", "--model", "openai/strong-model")
    verdict = json.loads(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert verdict["stages"]["reliability_models"]["strong_normalized"] == 1.0
    assert verdict["stages"]["reliability_models"]["weak_normalized"] == 0.0
    assert verdict["stages"]["execution_react"]["steps"] == 10  # the short rollout
    assert json.loads((env_dir / "verification.json").read_text())["stages"]["reliability_models"]


def test_differential_test_rejects_when_the_weaker_model_scores_as_high(llm_server, llm_env, tmp_path):
    env_dir = shutil.copytree(ROOT / "generated_envs/reference/crate_dock", tmp_path / "crate_dock")
    llm_server.rule = lambda n: Reply("No idea.")  # neither model can play: the reward cannot tell them apart
    result = verify(env_dir, llm_server, llm_env, "--agent-models", "openai/weak-model,openai/strong-model",
                    "--agent-runs", "2", "--agent-levels", "1")
    verdict = json.loads(result.stdout)
    assert result.returncode == 1
    assert verdict["stage"] == "reliability"
    assert "weaker at least as high in all 2 run(s): the reward does not measure skill" in verdict["reason"]
    assert json.loads((env_dir / "verification.json").read_text())["accepted"] is False


def test_agent_models_needs_two_specs(llm_server, llm_env, tmp_path):
    env_dir = shutil.copytree(ROOT / "generated_envs/reference/crate_dock", tmp_path / "crate_dock")
    result = verify(env_dir, llm_server, llm_env, "--agent-models", "openai/only-one")
    assert result.returncode == 2 and "expected WEAK,STRONG (two model specs)" in result.stderr
