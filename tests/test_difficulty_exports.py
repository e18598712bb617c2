"""Difficulty in every shape a trainer reads (issue 36 item 3): the profile verify wrote beside each
level's max reaches Python (envforge.open, envforge.make(difficulty=...)), OpenEnv's reset(difficulty=...),
Inspect's sample metadata, the verifiers rows, Harbor's task.toml, and evaluate reports scores by band."""
from __future__ import annotations

import json
import tomllib

import pytest
from cli_kit import envforge as run_envforge

import envforge
from envforge.pipeline.cli import main
from envforge.pipeline.testing.tiny_env import write_env

# Three corridors; repeating one move solves each, so each profile scores 0 (band easy).
CORRIDORS = {"levels/level_01.yaml": {"pos": 0, "goal": 3, "length": 6},
             "levels/level_02.yaml": {"pos": 7, "goal": 1, "length": 8},
             "val_levels/level_03.yaml": {"pos": 2, "goal": 1, "length": 7}}


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    env = write_env(tmp_path_factory.mktemp("profiled") / "corridor", levels=CORRIDORS)
    done = run_envforge("verify", env, "--write", "--stages", "reliability", "--random-episodes", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    return env


def test_python_reads_each_levels_profile_and_picks_levels_by_band(profiled):
    env = envforge.open(profiled)
    profile = env.difficulty("level_02")
    assert profile["score"] == 0 and profile["band"] == "easy" and profile["shortest_witness"]["value"] == 6
    assert env.levels("test", difficulty="easy") == ["levels/level_01.yaml", "levels/level_02.yaml"]
    assert env.levels("test", difficulty="0..10") == env.levels("test", difficulty="easy")
    with pytest.raises(envforge.UserError, match=r"difficulty hard: expected levels of the test split scoring "
                                                 r"60\.\.100, found scores 0\.\.0"):
        env.levels("test", difficulty="hard")
    assert env.curriculum("test") == ["levels/level_01.yaml", "levels/level_02.yaml"]  # equal scores: file order


def test_gymnasium_draws_from_the_band_and_says_the_levels_difficulty(profiled):
    gym_env = envforge.make(profiled, difficulty="easy")
    try:
        _, info = gym_env.reset(seed=3)
        assert info["level"] in ("levels/level_01.yaml", "levels/level_02.yaml")
        assert info["difficulty"]["band"] == "easy"
    finally:
        gym_env.close()
    with pytest.raises(envforge.UserError, match="difficulty medium"):
        envforge.make(profiled, difficulty="medium")


def test_openenv_reset_takes_a_difficulty(profiled):
    pytest.importorskip("openenv")
    from envforge.pipeline.api.serve import EnvforgeEnvironment, build_app

    _, served = build_app([str(profiled)])
    env = EnvforgeEnvironment(served["corridor"])
    try:
        first = env.reset(difficulty="easy", seed=1)
        assert first.level == "levels/level_02.yaml" and first.metadata["difficulty"]["band"] == "easy"
        with pytest.raises(ValueError, match="reset: difficulty hard: expected levels"):
            env.reset(difficulty="hard")
    finally:
        env.close()


def test_harbor_task_metadata_carries_the_profile(profiled, tmp_path):
    assert main(["export", "harbor", str(profiled), "--out", str(tmp_path / "tasks")]) == 0
    task = tomllib.loads((tmp_path / "tasks" / "corridor-level_02" / "task.toml").read_text())
    meta = task["metadata"]
    assert (meta["difficulty"], meta["difficulty_band"], meta["shortest_witness"], meta["shortest_witness_exact"]) \
        == (0, "easy", 6.0, True)


def test_inspect_samples_carry_the_profile_in_their_metadata(profiled):
    pytest.importorskip("inspect_ai")
    from envforge.tasks import _task

    samples = list(_task(profiled, "test", None, None, curriculum=True).dataset)
    assert [s.metadata["difficulty_band"] for s in samples] == ["easy", "easy"]
    assert samples[1].metadata["difficulty_profile"]["shortest_witness"]["value"] == 6


def test_evaluate_reports_scores_by_difficulty_band(profiled, tmp_path):
    done = run_envforge("evaluate", profiled, "--agent", "planner", "--runs", "1", "--out", tmp_path / "e")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "by difficulty band: easy 100.00%" in done.stdout
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["methods"][0]["overall"]["bands"] == {"easy": 1.0}
    report = (tmp_path / "e" / "report.md").read_text()
    assert "## By difficulty band" in report and "| planner | 100.00 |" in report
