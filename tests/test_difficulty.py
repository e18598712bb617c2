"""Difficulty profiles (issue 36 item 1): each level's profile is written beside its max in
level_max_rewards.json, every figure says whether it is exact or a bound, the score orders
levels, and the same command gives the same profile on an idle and on a loaded machine."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_kit import envforge

from envforge.pipeline import difficulty
from envforge.pipeline.testing.tiny_env import write_env

# Corridors: the goal 1, 3 and 6 cells from the start (shortest witnesses 1, 3 and 6 steps).
CORRIDORS = {"levels/level_01.yaml": {"pos": 0, "goal": 3, "length": 6},
             "levels/level_02.yaml": {"pos": 7, "goal": 1, "length": 8},
             "val_levels/level_03.yaml": {"pos": 2, "goal": 1, "length": 7}}


def _profiles(env) -> dict:
    maxima = json.loads((env / "level_max_rewards.json").read_text())
    return {k: v["difficulty"] for k, v in maxima["levels"].items()}


def test_verify_writes_a_profile_beside_each_max_with_exact_shortest_witnesses(tmp_path):
    env = write_env(tmp_path / "e", levels=CORRIDORS)
    done = envforge("verify", env, "--write", "--stages", "reliability", "--random-episodes", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    profiles = _profiles(env)
    shortest = {k: p["shortest_witness"] for k, p in profiles.items()}
    assert shortest == {"level_01.yaml": {"value": 3, "exact": True, "basis": "exact"},
                        "level_02.yaml": {"value": 6, "exact": True, "basis": "exact"},
                        "level_03.yaml": {"value": 1, "exact": True, "basis": "exact"}}
    # Two moves, two distinct successor states (the step is in the key), from every state searched.
    assert profiles["level_02.yaml"]["branching"]["value"] == 2.0
    assert profiles["level_03.yaml"]["trivial"] == "repeating move(direction='left') scores the max"
    # In a corridor the move toward the goal, repeated, maxes every level: what luck earns makes them easiest.
    assert {k: (p["best_constant_normalized"]["value"], p["score"]) for k, p in profiles.items()} == {
        k: (1.0, 0) for k in profiles}
    for p in profiles.values():
        assert p["band"] == difficulty.band_of(p["score"]) and p["score_version"] == difficulty.SCORE_VERSION
    assert "difficulty 3 easy, 0 medium, 0 hard" in done.stdout  # verify's reliability line


def test_a_budget_cut_shortest_witness_is_a_range_between_the_depth_searched_and_the_witness(tmp_path):
    env = write_env(tmp_path / "e", levels={"levels/level_01.yaml": {"pos": 0, "goal": 9, "length": 10},
                                            "levels/level_02.yaml": {"pos": 9, "goal": 0, "length": 10}})
    done = envforge("verify", env, "--write", "--stages", "reliability", "--random-episodes", "2",
                    "--profile-nodes", "6")
    assert done.returncode == 0, done.stdout + done.stderr
    figure = _profiles(env)["level_01.yaml"]["shortest_witness"]
    assert figure["exact"] is False and figure["basis"] == "range"
    assert figure["at_least"] == 3 and figure["at_most"] == 9 and figure["value"] == 9  # 6 nodes: 2 steps deep


@pytest.mark.slow
def test_profiles_are_identical_on_an_idle_and_a_loaded_machine(tmp_path):
    runs = []
    for loaded in (False, True):
        env = write_env(tmp_path / f"e{loaded}", levels=CORRIDORS)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)] if loaded else []
        try:
            done = envforge("verify", env, "--write", "--stages", "reliability", "--random-episodes", "3")
        finally:
            for process in busy:
                process.kill()
                process.wait()
        assert done.returncode == 0, done.stdout + done.stderr
        runs.append(_profiles(env))
    assert runs[0] == runs[1]


def test_bands_are_named_ranges_or_a_range_of_scores():
    assert difficulty.band_range("hard") == difficulty.BANDS["hard"]
    assert difficulty.band_range("10..25") == (10, 25)
    for bad in ("harder", "30..10", "0..101", "5"):
        with pytest.raises(ValueError, match="expected a band"):
            difficulty.band_range(bad)
    assert [difficulty.band_of(s) for s in (0, 39, 40, 59, 60, 100)] == ["easy", "easy", "medium", "medium",
                                                                        "hard", "hard"]


def test_the_score_grows_with_depth_and_search_and_falls_with_what_luck_earns():
    assert difficulty.score(1, 1, 0.0, 0.0) == 0
    assert difficulty.score(64, 100_000, 0.0, 0.0) == 100
    assert difficulty.score(6, 156, 0.0, 0.0) < difficulty.score(28, 9418, 0.0, 0.0)
    # what a random agent earns counts twice over: half the max on average quarters the score
    assert abs(difficulty.score(28, 9418, 0.5, 0.0) - difficulty.score(28, 9418, 0.0, 0.0) / 4) <= 1
    assert difficulty.score(9, 900, 0.2, 0.0) < difficulty.score(6, 156, 0.0, 0.0)
