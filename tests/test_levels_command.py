"""`envforge levels` (issue 36 item 2): N levels from an environment's own generator in a
difficulty band, written as a new environment folder (those levels its test split, with their
certified maxima and profiles) that the other commands take; the same arguments give the same
folder; a band the generator does not reach says so, with the scores it reached."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env

CRATE_DOCK = Path(__file__).resolve().parents[1] / "generated_envs" / "reference" / "crate_dock"


def _levels(folder: Path) -> dict:
    maxima = json.loads((folder / "level_max_rewards.json").read_text())["levels"]
    return {k: ((folder / "levels" / k).read_text(), v["max_reward"], v["difficulty"]) for k, v in maxima.items()}


def test_the_same_arguments_give_the_same_level_set(tmp_path):
    env = write_env(tmp_path / "corridor")
    made = []
    for run in ("a", "b"):
        done = envforge("levels", env, "--n", "2", "--band", "easy", "--batch", "3", "--random-episodes", "2",
                        "--out", tmp_path / run)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 level(s) in band easy (0..39)" in done.stdout
        made.append(_levels(tmp_path / run))
    assert made[0] == made[1] and list(made[0]) == ["level_01.yaml", "level_02.yaml"]
    assert not list((tmp_path / "a" / "val_levels").glob("*.yaml"))  # the set is the test split


def test_a_band_the_generator_does_not_reach_is_named_with_the_scores_reached(tmp_path):
    # Every corridor is solved by repeating one move: every level scores 0, none is hard.
    done = envforge("levels", write_env(tmp_path / "corridor"), "--n", "1", "--band", "hard", "--batch", "3",
                    "--random-episodes", "2", "--out", tmp_path / "hard")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UNREACHABLE: band hard (60..100): expected 1 distinct levels scoring in it" in done.stdout
    assert "score 0..0" in done.stdout
    assert not (tmp_path / "hard").exists() or not any((tmp_path / "hard").iterdir())


def test_a_band_that_is_no_band_is_refused_before_any_work(tmp_path):
    done = envforge("levels", write_env(tmp_path / "corridor"), "--band", "tough", "--out", tmp_path / "o")
    assert done.returncode == 2 and "expected a band (easy, medium, hard) or a score range LO..HI" in done.stderr


@pytest.mark.slow
def test_a_crate_dock_level_set_is_an_environment_the_planner_solves(tmp_path):
    done = envforge("levels", CRATE_DOCK, "--n", "2", "--band", "0..100", "--batch", "2", "--search-nodes", "5000",
                    "--random-episodes", "2", "--out", tmp_path / "set", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    made = json.loads(done.stdout)
    # the first two seeds whose levels were certified and profiled (a level whose max this budget leaves unknown
    # has no profile), in seed order
    assert list(made["levels"]) == ["level_01.yaml", "level_02.yaml"] and made["seeds"] == sorted(made["seeds"])
    levels = _levels(tmp_path / "set")
    assert all(profile["shortest_witness"]["value"] >= 1 for _, _, profile in levels.values())
    played = envforge("evaluate", tmp_path / "set", "--agent", "planner", "--runs", "1", "--out", tmp_path / "eval")
    assert played.returncode == 0, played.stdout + played.stderr
    assert "overall: 100.00%" in played.stdout
