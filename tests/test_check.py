"""`envforge check`: what a user sees for a sound environment and for each kind of broken one."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"


def check(env_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return envforge("check", env_dir, *flags)


@pytest.mark.parametrize("env_dir", [REFERENCE / "crate_dock", REFERENCE / "tide_pool",
                                     ROOT / "tests" / "fixtures" / "autoenv_format" / "maze_escape"],
                         ids=lambda p: p.name)
def test_check_accepts_reference_and_autoenv_format_envs(env_dir):
    result = check(env_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("ok: ")


def test_check_accepts_sound_env_and_json_says_so(tmp_path):
    env = write_env(tmp_path / "corridor")
    result = check(env, "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 0, result.stdout
    assert report["ok"] is True
    assert [p for p in report["problems"] if p["severity"] == "error"] == []
    assert report["stats"]["levels"] == 3


def test_check_warns_when_done_is_never_true_and_the_runtime_truncates(tmp_path):
    """The step cap is the runtime's: an env whose done() ignores it is truncated there, and warned
    about, not rejected."""
    env = write_env(tmp_path / "done_never_true", replace={"env_main.py": (
        "return self._state[\"pos\"] == self._state[\"goal\"] or self._t >= self.max_steps", "return False")})
    result = check(env)
    assert result.returncode == 0, result.stdout
    assert ("warning: env_main.py: expected done() to become true by termination.max_steps=12, found still running "
            "after 12 steps") in result.stdout
    assert "(the runtime truncated it)" in result.stdout and "random episodes of [12, 12, 12] steps" in result.stdout


BROKEN = {
    "crash_on_action": (
        {"env_main.py": ("step = 1 if", "step = 1 / 0 if")},
        "env_main.py:8: expected step(move(direction=",
    ),
    "generator_ignores_seed": (
        {"env_generate.py": ("rng = random.Random(seed)", "seed = 42\n    rng = random.Random(seed)")},
        "env_generate.py: expected different levels for seeds [1, 2, 3], found only 1 distinct level(s)",
    ),
    "validator_rejects_shipped_level": (
        {"env_validator.py": ('0 <= state.get("goal", -1)', '3 < state.get("goal", -1)')},
        "levels/level_01.yaml: expected the validator to accept this shipped level, found goal must lie inside",
    ),
    "non_deterministic": (
        {
            "env_main.py": (
                'return f"step {omega[\'t\']}: " + "".join(cells)',
                'import time\n        return f"step {omega[\'t\']} {time.perf_counter_ns()}: " + "".join(cells)',
            )
        },
        "env_main.py: expected the same observations and rewards for the same level, seed and actions (step 0)",
    ),
    "empty_observation": (
        {"env_main.py": ('return f"step {omega[\'t\']}: " + "".join(cells)', "return ''")},
        "env_main.py: expected the observation after reset on levels/level_01.yaml to render to non-empty text,"
        " found ''",
    ),
    "string_reward": (
        {"env_main.py": ("else (0.0, [], {})", "else ('zero', [], {})")},
        "expected step(move(direction=",
    ),
    "syntax_error": (
        {"env_main.py": ("class Corridor(SkinEnv):", "class Corridor(SkinEnv)")},
        "env_main.py:4: expected valid Python, found SyntaxError",
    ),
    "forbidden_call": (
        {
            "env_main.py": (
                "from pipeline.runtime import SkinEnv",
                "import subprocess\nfrom pipeline.runtime import SkinEnv",
            )
        },
        "env_main.py:1: expected no process, network, exit, environment or foreign calls, found import subprocess",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_rejects_broken_env_with_located_reason(tmp_path, case):
    replace, expected = BROKEN[case]
    env = write_env(tmp_path / case, replace=replace)
    result = check(env)
    assert result.returncode == 1, result.stdout
    assert expected in result.stdout, result.stdout
    assert "FAILED:" in result.stdout


def test_check_string_reward_is_named_as_invalid_reward(tmp_path):
    env = write_env(tmp_path / "r", replace=BROKEN["string_reward"][0])
    assert "invalid_reward: reward: expected a finite number, found 'zero'" in check(env).stdout


def test_check_reports_missing_files_and_bad_yaml(tmp_path):
    missing = write_env(tmp_path / "missing", drop=("config.yaml",))
    result = check(missing)
    assert result.returncode == 1
    assert "config.yaml: expected the file to exist, found it is missing" in result.stdout
    bad = write_env(tmp_path / "bad")
    (bad / "config.yaml").write_text("meta: {id: x\ntermination: [")
    result = check(bad)
    assert result.returncode == 1
    assert "config.yaml:" in result.stdout and "expected valid YAML" in result.stdout
    result = check(tmp_path / "nowhere")
    assert result.returncode == 1 and "expected an environment folder, found no such folder" in result.stdout


def test_check_leaves_the_env_folder_unchanged(tmp_path):
    env = write_env(tmp_path / "corridor")
    before = sorted(str(p.relative_to(env)) for p in env.rglob("*"))
    assert check(env).returncode == 0
    assert sorted(str(p.relative_to(env)) for p in env.rglob("*")) == before
