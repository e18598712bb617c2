"""Finite numbers everywhere (issue 22 item 5): an environment paying ±1.7e308 a step (finite)
sums to ±inf on the host. Its episodes end with the stop reason invalid_reward (the environment's
fault, left out of the scores), every record and report is strict JSON, and the clean
environment of the same run is scored. Averages are computed from unrounded values (issue 23 item 6)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from cli_kit import envforge as cli

import envforge
from envforge.pipeline.evaluate.report import summarize, write_report
from envforge.pipeline.kinds import EpisodeRecord

ROOT = Path(__file__).resolve().parents[1]
OVERFLOW = ROOT / "tests" / "hostile" / "overflow_reward"
TIDE_POOL = ROOT / "generated_envs" / "reference" / "tide_pool"


def strict(text: str):
    """JSON as the standard has it: NaN and Infinity are no JSON values."""
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def _envs(tmp_path: Path) -> Path:
    envs = tmp_path / "envs"
    shutil.copytree(OVERFLOW, envs / "overflow_reward")
    shutil.copytree(TIDE_POOL, envs / "tide_pool")
    return envs


def test_an_overflowing_env_ends_invalid_reward_and_the_clean_env_of_the_run_is_scored(tmp_path):
    out = tmp_path / "out"
    done = cli("evaluate", str(_envs(tmp_path)), "--agent", "random", "--runs", "1", "--max-levels", "2",
               "--out", str(out), "--json", traceback_ok=True)  # asserted below
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1  # an environment failed: as for env_error
    assert re.search(
        r"2 episode\(s\) ended because the environment's rewards were not finite numbers \(invalid_reward, "
        r"left out of the scores\); e\.g\. overflow_reward on levels/level_0[12]\.yaml: the total reward is "
        r"not a finite number after environment step 2: (1\.7e\+308 \+ 1\.7e\+308|-1\.7e\+308 \+ -1\.7e\+308)$",
        done.stderr,
        re.M,
    ), done.stderr
    printed = strict(done.stdout)
    rows = [strict(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    overflow = sorted((r["level"], r["stop_reason"], r["total_reward"], r["normalized"]) for r in rows
                      if r["env"] == "overflow_reward")
    assert overflow == [("levels/level_01.yaml", "invalid_reward", 1.7e308, None),
                        ("levels/level_02.yaml", "invalid_reward", -1.7e308, None)]
    clean = [r for r in rows if r["env"] == "tide_pool"]
    assert len(clean) == 2 and all(r["normalized"] is not None for r in clean)
    summary = strict((out / "summary.json").read_text())
    (method,) = summary["methods"]
    assert method["envs"]["overflow_reward"]["excluded"] == {"invalid_reward": 2}
    assert method["envs"]["overflow_reward"]["mean_normalized"] is None
    assert method["envs"]["tide_pool"]["episodes"] == 2 and method["envs"]["tide_pool"]["mean_normalized"] is not None
    assert printed["overall"]["mean_normalized"] == method["envs"]["tide_pool"]["mean_normalized"]
    for trajectory in (out / "trajectories").rglob("*.jsonl"):
        for line in trajectory.read_text().splitlines():
            strict(line)
    report = (out / "report.md").read_text()
    assert "random on overflow_reward: 2 episode(s) left out of the scores (invalid_reward 2)" in report
    assert "`invalid_reward` the environment's rewards were not finite numbers" in report


def test_the_python_api_ends_the_same_episodes_the_same_way(tmp_path):
    result = envforge.evaluate(_envs(tmp_path), agent="random", max_levels=2, runs=1, out=tmp_path / "out")
    stops = sorted((e.env, e.stop_reason) for e in result.episodes if e.env == "overflow_reward")
    assert stops == [("overflow_reward", "invalid_reward")] * 2
    assert result.envs["overflow_reward"].mean_normalized is None
    assert result.overall["mean_normalized"] == result.envs["tide_pool"].mean_normalized


def _record(env: str, run: int, level: str, normalized: float) -> EpisodeRecord:
    return EpisodeRecord.scored(env=env, level=level, run=run, agent="random", model="-", split="test",
                                stop_reason="env_ended", total_reward=normalized, max_reward=1.0, steps=3,
                                env_steps=3, valid_actions=3, invalid_actions=0, format_errors=0,
                                action_validity_rate=1.0, invalid_action_rate=0.0, error_streaks=0,
                                recovered_streaks=0, recovery_rate=None, distinct_states=3, model_calls=0,
                                retries=0, tokens_in=0, tokens_out=0, dollars=0.0, wall_seconds=0.1)


def test_the_overall_score_is_the_mean_of_unrounded_environment_means(tmp_path):
    """Three environments whose means round (to 4 places) to 0.0945, 0.0945 and 0.0944: the mean of
    the rounded means reads 9.45 %, the exact mean 9.44 % (0.094427)."""
    records = [_record(env, 0, "levels/a.yaml", value)
               for env, value in (("e1", 0.09446), ("e2", 0.09446), ("e3", 0.09436))]
    (method,) = summarize(records)
    write_report(tmp_path, [method])
    table = (tmp_path / "report.md").read_text().split("## Per environment")[0]
    assert "| random | – | – | – | – | – | – | 9.44 | – | 3.00 |" in table
    assert strict((tmp_path / "summary.json").read_text())["methods"][0]["overall"]["mean_normalized"] == 0.0944
