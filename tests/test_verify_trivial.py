"""Trivial levels are named (issue 36 item 4): a level doing nothing or one repeated action solves,
or a witness of one step reaches, is listed in verify's reliability figures and its acceptance
note, not rejected: a set of such levels teaches an agent nothing."""
from __future__ import annotations

import json

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env


def test_a_corridor_level_one_repeated_move_solves_is_named_trivial_with_the_move(tmp_path):
    # In a corridor the move toward the goal, repeated, always gets there: each level is trivial, and
    # which move says why; repeating one direction does not solve both, so the env is no degenerate one.
    levels = {"levels/level_01.yaml": {"pos": 0, "goal": 1, "length": 6},
              "levels/level_02.yaml": {"pos": 7, "goal": 2, "length": 8},
              "val_levels/level_03.yaml": {"pos": 6, "goal": 3, "length": 7}}
    done = envforge("verify", write_env(tmp_path / "e", levels=levels), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0, report["reason"]
    assert report["stages"]["reliability"]["trivial_levels"] == {
        "level_01.yaml": "repeating move(direction='right') scores the max",
        "level_02.yaml": "repeating move(direction='left') scores the max",
        "level_03.yaml": "repeating move(direction='left') scores the max"}
    assert "3 trivial level(s): level_01.yaml (repeating move(direction='right') scores the max)" in report["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["crate_dock", "tide_pool"])
def test_the_reference_puzzles_have_no_trivial_level(verified_reference, name):
    report = json.loads(verified_reference(name).stdout)
    assert report["accepted"] and "trivial_levels" not in report["stages"]["reliability"] or \
        report["stages"]["reliability"]["trivial_levels"] is None
    assert "trivial level" not in report["reason"]
