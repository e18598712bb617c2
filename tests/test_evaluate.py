"""`envforge evaluate` with the model-free agents: what a user sees on the reference environments."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.cli import main

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"
FAST = ("--max-levels", "3", "--runs", "2")


def evaluate_cmd(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "envforge", "evaluate", str(REFERENCE), *FAST, "--out", str(out), "--json", *args]


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """random and planner on both reference environments, through the real CLI, side by side."""
    base = tmp_path_factory.mktemp("baselines")
    plots = dict(os.environ, ENVFORGE_PLOTS="on")  # the suite turns them off elsewhere (tests/conftest.py)
    procs = {agent: subprocess.Popen(evaluate_cmd(base / agent, "--agent", agent), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=base, env=plots)
             for agent in ("random", "planner")}
    out = {}
    for agent, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out[agent] = (json.loads(stdout), base / agent)
    return out


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("env", ["crate_dock", "tide_pool"])
def test_planner_scores_higher_than_random_on_each_reference_env(baselines, env):
    planner, random_ = baselines["planner"][0]["envs"][env], baselines["random"][0]["envs"][env]
    assert planner["mean_normalized"] > random_["mean_normalized"]
    assert planner["mean_normalized"] == 1.0  # the planner replays a certified witness on every level
    assert planner["episodes"] == random_["episodes"] == 6


def test_no_normalized_reward_exceeds_one(baselines):
    for summary, out in baselines.values():
        rows = records(out)
        assert len(rows) == 12
        assert all(r["normalized"] is not None and r["normalized"] <= 1 for r in rows)
        assert summary["overall"]["clipped"] == 0


def test_json_summary_has_per_env_means_and_overall(baselines):
    summary, _ = baselines["random"]
    assert set(summary["envs"]) == {"crate_dock", "tide_pool"}
    for figures in summary["envs"].values():
        for key in ("mean_normalized", "std", "episodes", "mean_steps", "stop_reasons", "clipped", "tags"):
            assert key in figures
    overall = summary["overall"]
    assert overall["episodes"] == 12 and overall["environments"] == 2
    assert overall["categories"]["binary"] == summary["envs"]["crate_dock"]["mean_normalized"]
    assert overall["categories"]["partial"] == summary["envs"]["tide_pool"]["mean_normalized"]
    assert overall["categories"]["inverse"] is None  # no reference env is inverse


def test_every_episode_has_a_csv_row_and_a_trajectory(baselines):
    _, out = baselines["planner"]
    rows = (out / "episodes.csv").read_text().splitlines()
    assert rows[0].startswith("env,level,run,agent,model,split,stop_reason,total_reward,max_reward,normalized")
    assert len(rows) == 13
    for record in records(out):
        lines = [json.loads(x) for x in (out / record["trajectory"]).read_text().splitlines()]
        assert lines[0]["type"] == "episode" and lines[-1]["type"] == "end"
        assert sum(x["type"] == "turn" for x in lines) == record["steps"]
        assert record["stop_reason"] == "solved"


def test_plots_are_left_out_when_turned_off_and_a_bad_setting_is_named(tmp_path):
    # processes of their own: each runs with its own ENVFORGE_PLOTS
    off = dict(os.environ, ENVFORGE_PLOTS="off")
    done = subprocess.run(evaluate_cmd(tmp_path / "off", "--agent", "random", "--max-levels", "1"), env=off,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "off").glob("*.png")) and ".png" not in (tmp_path / "off" / "report.md").read_text()
    bad = dict(os.environ, ENVFORGE_PLOTS="sometimes")
    done = subprocess.run(evaluate_cmd(tmp_path / "bad", "--agent", "random"), env=bad, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "ENVFORGE_PLOTS: expected on or off, found 'sometimes'" in done.stderr


def test_report_is_a_table3_markdown_with_plots(baselines):
    _, out = baselines["random"]
    report = (out / "report.md").read_text()
    assert "| Method | Binary | Accum. | Full | Partial | Aligned | Inverse | Acc | Std | Steps |" in report
    assert "| random |" in report and "| crate_dock | binary, full, aligned | random |" in report
    for png in ("per_env.png", "categories.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in report


def test_resume_into_the_same_folder_runs_only_missing_episodes(baselines, tmp_path, capsys):
    _, done = baselines["random"]
    out = tmp_path / "resumed"
    shutil.copytree(done, out)
    lines = (out / "episodes.jsonl").read_text().splitlines()
    (out / "episodes.jsonl").write_text("\n".join(lines[:9]) + "\n")  # as if killed after 9 episodes

    assert main(["evaluate", str(REFERENCE), *FAST, "--agent", "random", "--out", str(out), "--resume"]) == 0
    assert "12 episode(s), 9 already done, 3 run now" in capsys.readouterr().out
    assert len(records(out)) == 12

    assert main(["evaluate", str(REFERENCE), *FAST, "--agent", "random", "--out", str(out), "--resume"]) == 0
    assert "12 episode(s), 12 already done, 0 run now" in capsys.readouterr().out
    assert len(records(out)) == 12
    assert len((out / "episodes.csv").read_text().splitlines()) == 13


def test_clips_above_the_certified_max_and_leaves_levels_without_one_empty(tmp_path, capsys):
    env = tmp_path / "crate_dock"
    shutil.copytree(REFERENCE / "crate_dock", env, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    maxima = json.loads((env / "level_max_rewards.json").read_text())
    maxima["levels"]["level_01.yaml"]["max_reward"] = 0.5  # a bound the planner beats
    del maxima["levels"]["level_02.yaml"]
    (env / "level_max_rewards.json").write_text(json.dumps(maxima))

    out = tmp_path / "out"
    assert main(["evaluate", str(env), "--agent", "planner", "--max-levels", "2", "--runs", "1",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["envs"]["crate_dock"]
    assert summary["clipped"] == 1 and summary["null_normalized"] == 1
    assert summary["mean_normalized"] == 1.0
    by_level = {r["level"]: r for r in records(out)}
    assert by_level["levels/level_01.yaml"]["normalized"] == 1.0
    assert by_level["levels/level_01.yaml"]["normalized_raw"] == 2.0
    assert by_level["levels/level_02.yaml"]["normalized"] is None
    report = (out / "report.md").read_text()
    assert "1 episode(s) scored above the certified max reward and were clipped at 1" in report
    assert "no max reward for level_02.yaml in level_max_rewards.json" in report


def test_a_folder_without_environments_is_a_usage_error(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path), "--agent", "random"]) == 2
    err = capsys.readouterr().err
    assert "expected an environment folder (env_main.py, config.yaml) or a folder holding some, found none" in err


def test_user_agent_runs_in_process_over_a_proxy_env(tmp_path, capsys):
    agent = tmp_path / "my_agent.py"
    agent.write_text(
        "import asyncio\n"
        "class Walker:\n"
        "    async def run(self, env, env_info):\n"
        "        env.reset(mode='load', world_id=env_info['world_id'])\n"
        "        obs = env.render_skin(env.observe_semantic())\n"
        "        total, steps = 0.0, 0\n"
        "        while steps < env_info['max_step'] and not env.done():\n"
        "            _, reward, done, info = env.step({'action': 'move', 'params': {'direction': 'up'}})\n"
        "            total += reward; steps += 1\n"
        "            assert 'direction' in info['last_action_result']\n"
        "            await asyncio.sleep(0)\n"
        "        return {'total_reward': total, 'step': steps}\n"
        "def crash(env, env_info):\n"
        "    env.step({'action': 'wait', 'params': {}})\n"
        "    raise RuntimeError('my agent broke')\n")
    out = tmp_path / "out"
    assert main(["evaluate", str(REFERENCE / "crate_dock"), "--agent", f"{agent}:Walker", "--max-levels", "1",
                 "--runs", "1", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["envs"]["crate_dock"]["stop_reasons"] == {"invalid_action_streak": 1}
    (record,) = records(out)
    assert record["invalid_actions"] == 10 and record["invalid_action_rate"] == 1.0 and record["steps"] == 10

    # Issue 16 case 3: an agent that raises is not a run that did what was asked: exit 1, and the
    # cause with the file and line it was raised at.
    assert main(["evaluate", str(REFERENCE / "crate_dock"), "--agent", f"{agent}:crash", "--max-levels", "1",
                 "--runs", "1", "--out", str(out), "--resume"]) == 1
    error = capsys.readouterr().err
    assert "1 episode(s) ended because the agent's own code raised (agent_error" in error
    assert f'RuntimeError: my agent broke (File "{agent}", line 15)' in error
    crashed = [r for r in records(out) if r["agent"].endswith(":crash")][0]
    assert crashed["stop_reason"] == "agent_error" and "my agent broke" in crashed["stop_detail"]
    assert crashed["env_steps"] == 1


def test_a_generation_output_is_searched_for_accepted_environments_only(tmp_path, capsys):
    out = tmp_path / "generated"
    for where in ("_rejected/broken", "_work/half_done"):
        shutil.copytree(
            REFERENCE / "crate_dock", out / where, ignore=shutil.ignore_patterns("__pycache__", "_generated")
        )
    assert main(["evaluate", str(out), "--agent", "random"]) == 2
    assert "found none" in capsys.readouterr().err
    shutil.copytree(
        REFERENCE / "tide_pool", out / "tide_pool", ignore=shutil.ignore_patterns("__pycache__", "_generated")
    )
    assert main(["evaluate", str(out), "--agent", "random", "--max-levels", "1", "--runs", "1",
                 "--out", str(tmp_path / "eval"), "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["envs"]) == ["tide_pool"]


def test_a_theme_named_like_a_reserved_folder_gets_a_folder_name_that_is_not_and_is_found(tmp_path, capsys):
    from envforge.pipeline.generate.themes import folder_name

    out = tmp_path / "generated"
    names = sorted(folder_name(theme) for theme in ("rejected", "_work", "_rejected"))
    assert not [n for n in names if n in ("rejected", "_work", "_rejected") or n.startswith("_")], names
    for name in names:
        shutil.copytree(REFERENCE / "tide_pool", out / name, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    assert main(["evaluate", str(out), "--agent", "random", "--max-levels", "1", "--runs", "1",
                 "--out", str(tmp_path / "eval"), "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["envs"]) == names


def test_a_log_gets_the_plan_first_then_plain_progress_lines(tmp_path):
    """Issue 23: with stderr not a terminal (a log, CI, Jupyter) evaluate printed nothing, and its
    plan line came only after the run."""
    done = envforge("evaluate", str(REFERENCE), *FAST, "--agent", "random", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("evaluate: random: ")]
    assert lines[0] == "evaluate: random: 12 episode(s) planned, 0 already done, 12 to run now"
    progress = lines[1:]
    assert [line.split(": ")[2].split(" ")[0] for line in progress] == [f"{n}/12" for n in range(1, 13)]
    assert progress[-1].startswith("evaluate: random: 12/12 episode(s) done, mean 0.")
    assert "\r" not in done.stderr  # no bar redrawn into the log


def test_levels_whose_max_is_unknown_or_a_claim_found_wrong_are_left_out_with_a_note(tmp_path, capsys):
    """Never divide by a wrong max: an unknown max (verify's search found no reward) and a claim
    verification found beaten score nothing; an unchecked claim of a foreign folder scores, noted."""
    env = tmp_path / "crate_dock"
    shutil.copytree(REFERENCE / "crate_dock", env, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
    (env / "manifest.json").unlink()  # a folder envforge did not make
    maxima = json.loads((env / "level_max_rewards.json").read_text())
    # the folder's own claims, as a foreign folder ships them: verify's certification fields (the
    # reference's file is written by verify) are dropped, but level_01's, which verify found unknown
    maxima["levels"] = {key: {"max_reward": entry["max_reward"]} for key, entry in maxima["levels"].items()}
    maxima["levels"]["level_01.yaml"]["certainty"] = "unknown"
    (env / "level_max_rewards.json").write_text(json.dumps(maxima))
    claimed = maxima["levels"]["level_02.yaml"]["max_reward"]
    (env / "verification.json").write_text(json.dumps({"stages": {"levels": {"claims": {
        "level_02.yaml": {"claimed": claimed, "found": claimed * 2, "exhaustive": False, "status": "beaten"}}}}}))

    out = tmp_path / "out"
    assert main(["evaluate", str(env), "--agent", "planner", "--max-levels", "3", "--runs", "1",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["envs"]["crate_dock"]
    assert summary["null_normalized"] == 2 and summary["mean_normalized"] == 1.0
    by_level = {r["level"]: r for r in records(out)}
    assert by_level["levels/level_01.yaml"]["normalized"] is None
    assert by_level["levels/level_01.yaml"]["normalized_note"].startswith(
        "the max reward of level_01.yaml is unknown (verify's search found no reward)")
    assert by_level["levels/level_02.yaml"]["normalized"] is None
    assert by_level["levels/level_02.yaml"]["normalized_note"].startswith(
        f"the claimed max reward of level_02.yaml ({claimed:g}) is beaten: envforge verify scored {claimed * 2}")
    assert by_level["levels/level_03.yaml"]["normalized"] == 1.0
    assert by_level["levels/level_03.yaml"]["normalized_note"] == (
        f"the max reward of level_03.yaml ({maxima['levels']['level_03.yaml']['max_reward']:g}) is the environment's "
        f"own claim, not checked by envforge verify")
    report = (out / "report.md").read_text()
    assert "normalized reward left empty: the max reward of level_01.yaml is unknown" in report
    assert "normalized reward divides by an uncertified max: the max reward of level_03.yaml" in report
