"""A search that reaches depth when breadth fails (issue 38 item 2): when best-first has stepped half
its node budget and no step paid, beam dives from the start take the rest (pipeline/sandbox/inside/
search.py), over the same transposition table and frontier. A two-crate push puzzle whose shortest
solution is 15 pushes and moves: best-first alone (envforge before the dives) spends all 20,000 nodes,
verify's default, and finds nothing; with the dives the same budget solves it. The dives draw their
ties from seeded generators: the same witness and node count on an idle and on a busy machine."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sandbox_kit import side_by_side

from envforge.pipeline import planner
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.levelmax import SEARCH_NODES
from envforge.pipeline.sandbox.outside.client import EnvClient

pytestmark = pytest.mark.slow  # seconds a search, one quiet and one loaded

ROOT = Path(__file__).resolve().parent.parent
# crate_dock's rules (push, never pull) in a 7x7 room, two crates, 40 steps; solved in 15 at best.
LEVEL = {"grid": ["#########", "#.......#", "#...o...#", "#.......#", "#.......#", "#.......#", "##..o...#",
                  "#.......#", "#########"],
         "agent": {"pos": [3, 7]}, "crates": [[5, 5], [3, 2]], "game": {"solved": False, "pushes": 0}}


def push_puzzle(path: Path) -> Path:
    shutil.copytree(ROOT / "generated_envs" / "reference" / "crate_dock", path, ignore=shutil.ignore_patterns(
        "__pycache__", "_generated", "levels", "val_levels", "level_max_rewards.json", "manifest.json"))
    config = (path / "config.yaml").read_text()
    assert "max_steps: 30" in config
    (path / "config.yaml").write_text(config.replace("max_steps: 30", "max_steps: 40"))
    (path / "levels").mkdir()
    (path / "levels" / "level_01.yaml").write_text(yaml.safe_dump(LEVEL))
    return path


def _search(env: Path) -> tuple:
    spec = EnvSpec.open(env, full_paths=False)
    with EnvClient.open(spec) as client:
        client.reset("levels/level_01.yaml")
        found = planner.search(client, spec, max_nodes=SEARCH_NODES, seconds=600)
        client.reset("levels/level_01.yaml")
        replayed = planner.replay(client, found.witness)
    return found, replayed


def test_a_fifteen_step_push_puzzle_best_first_misses_is_solved_by_the_dives_alike_idle_and_busy(tmp_path):
    env = push_puzzle(tmp_path / "push")
    (quiet, replayed), (loaded, _) = side_by_side(lambda: _search(env), lambda: _search(env), running=0.4)
    assert (quiet.best_reward, quiet.proof, quiet.stopped) == (1.0, "upper_bound", "upper_bound")
    assert replayed == (1.0, True, len(quiet.witness)) and 15 <= len(quiet.witness) <= 40
    # Best-first stepped half the budget with nothing paid before the first dive, and a dive found it.
    assert quiet.dives >= 1 and quiet.dive_nodes > 0 and quiet.nodes > SEARCH_NODES // 2
    assert not quiet.cut_by_clock and not loaded.cut_by_clock
    assert (loaded.witness, loaded.nodes, loaded.dives, loaded.dive_nodes) == (
        quiet.witness, quiet.nodes, quiet.dives, quiet.dive_nodes)
