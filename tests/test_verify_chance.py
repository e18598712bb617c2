"""verify on a stochastic maze: every move slips (the agent stays put) with probability SLIP, drawn
from the global RNG in step, so the planner replanning reaches the far exit in about a fifth of the
episodes. Every level gets an expectation estimate with its interval, labelled a lower bound, and
the figures say how many episodes over which chance seeds were played."""
from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import ENV_MAIN, write_env
from envforge.pipeline.verify import chance

pytestmark = pytest.mark.slow  # measured: a whole verify of a stochastic env, ~1 minute

SLIP = 1 / 3
# 10 cells to the exit in a 12-step cap: at least 10 of 12 moves must not slip.
FAR = {"levels/level_01.yaml": {"pos": 0, "goal": 10, "length": 11},
       "levels/level_02.yaml": {"pos": 10, "goal": 0, "length": 11},
       "val_levels/level_03.yaml": {"pos": 1, "goal": 11, "length": 12}}


def _solved_by_acting_right(slip: float = SLIP, steps: int = 12, distance: int = 10) -> float:
    """The chance that moving toward the exit every step gets there: no policy does better."""
    keep = 1 - slip
    return sum(math.comb(steps, k) * keep ** k * slip ** (steps - k) for k in range(distance, steps + 1))


def slippery_maze(path: Path, slip: float = SLIP) -> Path:
    source = ENV_MAIN.replace("from pipeline.runtime import SkinEnv",
                              "import random\n\nfrom pipeline.runtime import SkinEnv").replace(
        'step = 1 if params["direction"] == "right" else -1',
        f'step = (1 if params["direction"] == "right" else -1) if random.random() >= {slip!r} else 0')
    return write_env(path, replace={"env_main.py": source}, levels=FAR)


def verify(env_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return envforge("verify", env_dir, "--json", "--stages", "levels,reliability", *flags)


def test_every_level_of_a_stochastic_maze_gets_an_estimate_with_its_interval(tmp_path):
    best = _solved_by_acting_right()
    assert 0.15 < best < 0.25  # the maze is solved about a fifth of the time, by the best policy there is
    result = verify(slippery_maze(tmp_path / "maze"))
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["accepted"] is True, report["reason"]
    levels = report["stages"]["levels"]
    assert levels["stochastic"]["level"] == "levels/level_01.yaml"
    assert not levels.get("unknown_maxima"), levels.get("unknown_maxima")
    assert "a lower bound" in levels["stochastic_note"]
    nodes = chance.budget(levels["search_budget"]["nodes_per_level"])
    estimates = levels["expectation_estimates"]
    assert len(estimates) == len(FAR) and estimates.keys() == levels["max_rewards"].keys()
    for key, found in estimates.items():
        low, high = found["ci95"]
        assert low <= found["mean"] == levels["max_rewards"][key] <= high and low < high, found
        assert low <= best <= high, found  # the interval holds the true max
        # a policy's mean is a lower bound on the best policy's; the estimate is no lower than any policy tried
        assert found["lower_bound"] is True and found["mean"] == max(found["tried"].values())
        assert {"the replanning agent", "repeating move(direction='left')",
                "repeating move(direction='right')"} <= found["tried"].keys()
        plans = found["replanning"]
        # the replanning agent played until its node budget was spent, over chance seeds 1..seeds, and scored
        assert chance.MIN_EPISODES <= plans["seeds"] <= chance.EPISODES and 0 < plans["scored"] < plans["seeds"]
        assert plans["search_nodes"] >= nodes or plans["seeds"] == chance.EPISODES
        assert found["episodes_tried"] == plans["seeds"] + chance.ESTIMATE_SEEDS * (len(found["tried"]) - 1)
    reliability = report["stages"]["reliability"]
    assert reliability["planner_normalized"] == 1.0 and reliability["random_normalized"] < 0.5


def test_a_maze_no_move_ever_crosses_is_unknown_naming_the_episodes_tried(tmp_path):
    """Every move slips: no episode of any policy scores, so every max is unknown, saying how many were played."""
    result = verify(slippery_maze(tmp_path / "stuck", slip=1.0))
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["accepted"] is False and report["stage"] == "levels"
    assert "0 rejected by the validator, 36 unfit; e.g. seed 1: search achieves nothing" in report["reason"]
    levels = report["stages"]["levels"]
    unknown = levels["unknown_maxima"]
    assert set(unknown) == {"level_01.yaml", "level_02.yaml", "level_03.yaml"}
    for key, why in unknown.items():
        found = levels["expectation_estimates"][key]
        assert why == f"max reward unknown (stochastic: no episode scored, {found['episodes_tried']} played over " \
                      f"chance seeds)"
        assert found["scored_episodes"] == 0 and found["replanning"]["seeds"] >= chance.MIN_EPISODES
        others = len(found["tried"]) - 1  # the constant policies (and the witness, where there is one)
        assert found["episodes_tried"] == found["replanning"]["seeds"] + chance.ESTIMATE_SEEDS * others
