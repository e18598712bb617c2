"""The one search (pipeline/sandbox/inside/search.py) behind verify's max rewards, the planner agent and the
plan tests: budgets in nodes give the same numbers on an idle and a busy machine; best-first finds
deep witnesses breadth-first cannot; "exact" only with a proof; the safety stop is labelled."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_kit import side_by_side

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.planner import candidates, end_goals, replay, reward_bound
from envforge.pipeline.sandbox.outside.client import EnvClient

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"
DEV = ROOT.parent / "shared" / "autoenv-dev"
if not DEV.is_dir():
    DEV = Path("/work/shared/autoenv-dev")


def dev_env(name: str) -> Path:
    if not (DEV / name).is_dir():
        pytest.skip(f"the AutoEnv development corpus is not at {DEV} (../shared/autoenv-dev)")
    return DEV / name


def open_level(env: Path, level: str):
    spec = EnvSpec.open(env, full_paths=False)
    worker = EnvClient.open(spec)
    client = worker.__enter__()
    client.reset(level)
    return spec, worker, client, candidates(spec.actions, client)


def test_best_first_finds_an_answer_only_a_final_submit_pays_where_breadth_first_does_not():
    """4_MagneticField pays only on SUBMIT_ANSWER: 0.3/0.2 per right hex digit, 0.2 more when all four
    are right (1.2). The witness is 8 steps deep among 19 actions; breadth-first spends its budget on
    the first 3-4 steps."""
    spec, worker, client, actions = open_level(dev_env("4_MagneticField"), "levels/level_03.yaml")
    try:
        best = client.search(actions, max_nodes=5_000, time_in_key=False, order="best")
        breadth = client.search(actions, max_nodes=5_000, time_in_key=False, order="breadth")
        assert best.best_reward == pytest.approx(1.2) and len(best.witness) == 8
        assert breadth.best_reward < 1.0 and breadth.stopped == best.stopped == "nodes"
        client.reset("levels/level_03.yaml")
        assert replay(client, best.witness) == (pytest.approx(1.2), True, 8)
        # Its DSL declares rewards of 1.0 and 0.0 only: the first 0.3 the search meets refutes that bound.
        bound = reward_bound(spec.config)
        assert bound == {"values": [0.0, 1.0], "step": 1.0, "once": True}
        client.reset("levels/level_03.yaml")
        refuted = client.search(actions, max_nodes=5_000, time_in_key=False, order="best", bound=bound)
        assert refuted.proof is None and refuted.best_reward == pytest.approx(1.2)
        assert refuted.bound_refuted.startswith("a step paid 0.3, none of the declared reward values [0.0, 1.0]")
    finally:
        worker.__exit__(None, None, None)


def test_a_far_goal_is_found_in_a_few_hundred_nodes_and_the_declared_binary_reward_proves_it():
    """23_DangerDetection: the bomb (reward 1.0, the only positive value its DSL declares) is 10 moves
    away on level_03; every move reveals a cell, so breadth-first drowns in orders of the same moves.
    Novel states first reach it; the declared bound met makes 1.0 exact and stops the search."""
    spec, worker, client, actions = open_level(dev_env("23_DangerDetection"), "levels/level_03.yaml")
    try:
        found = client.search(actions, max_nodes=20_000, time_in_key=False, order="best",
                              bound=reward_bound(spec.config))
        assert (found.best_reward, found.proof, found.stopped) == (1.0, "upper_bound", "upper_bound")
        assert len(found.witness) == 10 and found.nodes < 2_000
        again = client.search(actions, max_nodes=20_000, time_in_key=False, order="best",
                              bound=reward_bound(spec.config))
        assert (again.witness, again.nodes) == (found.witness, found.nodes)  # deterministic
    finally:
        worker.__exit__(None, None, None)


def test_a_sliding_puzzle_is_solved_by_heading_for_the_end_condition_its_dsl_names():
    """24_MemoryMatching: an 8-puzzle whose target pattern (reward 1.0) is 15 moves away on level_01,
    and whose state counts its steps down (`steps_remaining`). The count is left out of the merge key
    (one less after every action, like a count up), and best-first heads for the DSL's end condition
    `board.grid == targets.chaos_pattern` (its other one, the forbidden pattern one move away, ends the
    episode with nothing and is dropped as a goal). The declared binary reward then proves 1.0 exact.
    Without the goals, the same budget finds nothing."""
    spec, worker, client, actions = open_level(dev_env("24_MemoryMatching"), "levels/level_01.yaml")
    try:
        goals = end_goals(spec.config)
        assert goals == [["board.grid", "targets.chaos_pattern"], ["board.grid", "targets.forbidden_pattern"]]
        found = client.search(actions, max_nodes=20_000, time_in_key=False, order="best",
                              bound=reward_bound(spec.config), goals=goals)
        assert (found.best_reward, found.proof, found.stopped) == (1.0, "upper_bound", "upper_bound")
        client.reset("levels/level_01.yaml")
        assert replay(client, found.witness) == (1.0, True, len(found.witness))
        client.reset("levels/level_01.yaml")
        blind = client.search(actions, max_nodes=found.nodes, time_in_key=False, order="best",
                              bound=reward_bound(spec.config))
        assert (blind.best_reward, blind.stopped) == (0.0, "nodes")
    finally:
        worker.__exit__(None, None, None)


def test_the_safety_stop_is_labelled_and_verify_names_it(tmp_path):
    """A wall-clock cut is not a budget: the result says which mechanism ended it, and verify labels
    every level it cut, since those figures would change with machine load."""
    spec, worker, client, actions = open_level(REFERENCE / "tide_pool", "levels/level_01.yaml")
    try:
        cut = client.search(actions, max_nodes=10_000_000, seconds=0.001, order="best")
        assert cut.stopped == "seconds" and cut.cut_by_clock and cut.proof is None
    finally:
        worker.__exit__(None, None, None)
    env = tmp_path / "tide_pool"
    shutil.copytree(REFERENCE / "tide_pool", env, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    proc = subprocess.run([sys.executable, "-m", "envforge", "verify", str(env), "--stages", "levels",
                           "--search-seconds", "0.001", "--json", "--write"], capture_output=True, text=True,
                          timeout=600)
    levels = json.loads(proc.stdout)["stages"]["levels"]
    assert len(levels["cut_by_safety_stop"]) == len(levels["levels_scored"]) > 0 and levels["safety_stops"] >= 1
    written = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    entry = written["level_01.yaml"]
    assert entry["cut_by_clock"] is True and "safety stop" in entry["notes"] and entry["exact"] is False


def _verify_and_plan(tmp: Path, name: str) -> dict:
    """verify's verdict, maxima and node counts, and the planner's scores, on a copy of a reference env."""
    env = tmp / name
    shutil.copytree(REFERENCE / name, env, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    verify = subprocess.run([sys.executable, "-m", "envforge", "verify", str(env), "--json", "--write"],
                            capture_output=True, text=True, timeout=1800)
    return _figures(verify.returncode, verify.stdout, env, tmp)


def _figures(code: int, stdout: str, env: Path, tmp: Path) -> dict:
    """The figures of verify's run on `env` (its exit code and --json output), and the planner's
    scores there (an evaluation written under `tmp`)."""
    report = json.loads(stdout)
    maxima = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    out = tmp / f"{env.name}-planner"
    evaluate = subprocess.run([sys.executable, "-m", "envforge", "evaluate", str(env), "--agent", "planner",
                               "--max-levels", "3", "--runs", "1", "--out", str(out), "--json"],
                              capture_output=True, text=True, timeout=1800)
    assert evaluate.returncode == 0, evaluate.stderr[-2000:]
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    levels = report["stages"]["levels"]
    return {
        "verdict": (code, report["accepted"], report["stage"]),
        "maxima": {k: (v["max_reward"], v["exact"], v["certainty"], v["search_nodes"], v["witness"])
                   for k, v in maxima.items()},
        "nodes": (report["stages"]["execution"]["planner_nodes"], levels["search_nodes"]),
        "cut": levels["cut_by_safety_stop"],
        "planner": sorted((e["level"], e["total_reward"], e["normalized"], e["steps"]) for e in episodes),
    }


@pytest.mark.parametrize("name", ["crate_dock", "tide_pool"])
def test_verify_and_the_planner_give_the_same_numbers_on_an_idle_and_a_busy_machine(tmp_path, name,
                                                                                    verified_reference):
    """Budgets in nodes: a busy machine (the commands and their workers running 40% of the time, as
    four busy loops on two cores leave them) changes the time a search takes, not what it finds. (With
    the old 20-30 s budgets the maxima and the planner's scores moved with the load.) The quiet run
    is the session's verify of the env (conftest.py's verified_reference, made at full speed) and a
    planner evaluation of it beside the loaded run, while the loaded one is held stopped."""
    def quiet() -> dict:
        done = verified_reference(name)
        (tmp_path / "quiet").mkdir()
        return _figures(done.returncode, done.stdout, done.out, tmp_path / "quiet")

    quiet, loaded = side_by_side(quiet, lambda: _verify_and_plan(tmp_path / "loaded", name), running=0.4)
    assert quiet["verdict"][:2] == (0, True)
    assert quiet["cut"] == [] == loaded["cut"]  # the node budget, not the safety stop, bounded every search
    assert loaded == quiet


def test_the_planner_agent_heads_for_the_dsls_end_condition_as_verify_does(tmp_path):
    """The planner agent searches through planner.search, as verify does, so it steers toward
    24_MemoryMatching's `board.grid == targets.chaos_pattern` too: with 20,000 nodes it solves
    level_01 (15 moves away), which the same budget without the goals does not (the test above)."""
    env = tmp_path / "24_MemoryMatching"
    shutil.copytree(dev_env("24_MemoryMatching"), env, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    out = tmp_path / "planner"
    proc = subprocess.run([sys.executable, "-m", "envforge", "evaluate", str(env), "--agent", "planner",
                           "--planner-nodes", "20000", "--max-levels", "1", "--runs", "1", "--out", str(out),
                           "--json"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (episode,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert (episode["level"], episode["total_reward"]) == ("levels/level_01.yaml", 1.0)
    assert 15 <= episode["steps"] <= 30
