"""`envforge play`: a replayed game prints every observation and the final score."""
from __future__ import annotations

import subprocess
from pathlib import Path

from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env

ROOT = Path(__file__).resolve().parent.parent


def play(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`envforge play ARGS` in this process; with `stdin`, in a process of its own that reads it."""
    if stdin is None:
        return envforge("play", *args, traceback_ok=True)  # a test asserts what it prints
    return envforge("play", *args, input=stdin, traceback_ok=True)


def test_replayed_solution_solves_the_reference_level():
    result = play(str(ROOT / "generated_envs/reference/crate_dock"),
                  "--actions", str(ROOT / "examples/crate_dock_level_01.actions"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("> move") == 17
    assert "== the episode ended after 17 step(s): total reward 1" in result.stdout
    assert "normalized reward 1.000" in result.stdout


def test_play_prints_each_observation_reward_and_result(tmp_path):
    env = write_env(tmp_path / "corridor")
    actions = tmp_path / "a.txt"
    actions.write_text('# comment\nmove right\nmove direction=right\n{"action": "jump", "params": {}}\nmove right\n')
    result = play(str(env), "--actions", str(actions))
    assert result.returncode == 0, result.stderr
    assert "step 0: @..G.." in result.stdout
    assert "step 1: .@.G.." in result.stdout
    assert "result: unknown action; use move with direction left or right" in result.stdout
    assert "== the episode ended after 4 step(s): total reward 1" in result.stdout
    assert "normalized reward: unknown" in result.stdout


def test_play_interactive_reads_stdin_until_eof(tmp_path):
    env = write_env(tmp_path / "corridor")
    result = play(str(env), "--level", "level_02", stdin="?\nmove right\n")
    assert result.returncode == 0, result.stderr
    assert "move direction=<left|right>" in result.stdout
    assert "stopped early after 1 step(s): total reward 0" in result.stdout


def test_play_generated_level_from_seed(tmp_path):
    env = write_env(tmp_path / "corridor")
    result = play(str(env), "--seed", "5", stdin="")
    assert result.returncode == 0, result.stderr
    assert "generated level (seed 5)" in result.stdout


def test_play_bad_input_gets_clear_errors(tmp_path):
    env = write_env(tmp_path / "corridor")
    result = play(str(env), "--level", "level_99")
    assert result.returncode == 2
    assert "--level level_99: expected one of level_01, level_02, level_03" in result.stderr
    result = play(str(env), "--actions", str(tmp_path / "none.txt"))
    assert result.returncode == 2 and "expected a readable UTF-8 text file" in result.stderr
    result = play(str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "expected an environment folder" in result.stderr
    assert "Traceback" not in result.stderr


def test_play_reports_an_environment_failure_without_traceback(tmp_path):
    env = write_env(tmp_path / "crash", replace={"env_main.py": ("step = 1 if", "step = 1 / 0 if")})
    actions = tmp_path / "a.txt"
    actions.write_text("move right\n")
    result = play(str(env), "--actions", str(actions))
    assert result.returncode == 1
    assert "The environment failed: env_main.py:8: exception: ZeroDivisionError" in result.stderr


def test_an_observation_of_a_million_characters_is_shown_cut_and_says_so(tmp_path):
    flood = ('return f"step {omega', 'return "\\n" * 1_000_000 + f"step {omega')
    env = write_env(tmp_path / "flood", replace={"env_main.py": flood})
    actions = tmp_path / "a.txt"
    actions.write_text("move right\n")
    result = play(str(env), "--actions", str(actions))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("characters not shown]") == 2  # after reset and after the step
    size = 1_000_000 + len("step 0: @..G..")
    assert f"… [cut: {size - 64 * 1024} of {size} characters not shown]" in result.stdout
    assert len(result.stdout) < 200_000
