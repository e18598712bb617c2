"""Numbers you can trust after a resume: an episode record carries what determined it, and
`evaluate --resume` reuses it only when all of that still holds; splits and settings are never
averaged together; an --out holding a run needs --resume (as in generate and learn); a command
that fails validation writes nothing."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.cli import main

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"
ONE = ("--max-levels", "1", "--runs", "1")


def evaluate(env: Path, out: Path, *flags: str) -> int:
    return main(["evaluate", str(env), *ONE, "--out", str(out), *flags])


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_every_record_carries_what_determined_it(tmp_path):
    out = tmp_path / "ev"
    assert evaluate(REFERENCE / "crate_dock", out, "--agent", "planner") == 0
    (record,) = records(out)
    assert record["format"] == "envforge.episode/1" and record["envforge"]
    assert len(record["env_hash"]) == 64 and len(record["level_hash"]) == 64
    assert record["split"] == "test" and record["max_reward"] == 1.0
    assert record["settings"]["limits"]["max_steps"] == 0  # 0: the environment's own termination.max_steps
    assert record["settings"]["planner_nodes"] == 100_000 and record["settings"]["call_seconds"] == 10.0


@pytest.mark.slow  # measured: the longest of the module (three evaluate runs)
def test_an_edited_reward_is_scored_anew_not_served_from_the_old_record(tmp_path, capsys):
    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    out = tmp_path / "ev"
    assert evaluate(env, out, "--agent", "planner") == 0
    assert "mean normalized 100.00% over 1 episode(s)" in capsys.readouterr().out
    config = env / "config.yaml"
    config.write_text(config.read_text().replace("all_crates_docked: 1.0", "all_crates_docked: 0.5"))

    assert evaluate(env, out, "--agent", "planner", "--resume") == 0
    shown = capsys.readouterr().out
    assert "1 episode(s), 0 already done, 1 run now" in shown
    assert "run again, their records in" in shown and "the environment changed (1)" in shown
    assert "mean normalized 50.00% over 1 episode(s)" in shown
    latest = records(out)[-1]
    assert latest["total_reward"] == 0.5 and latest["normalized"] == 0.5
    assert json.loads((out / "summary.json").read_text())["methods"][0]["envs"]["crate_dock"]["mean_normalized"] == 0.5

    assert evaluate(env, out, "--agent", "planner", "--resume") == 0  # nothing changed since: reused
    assert "1 episode(s), 1 already done, 0 run now" in capsys.readouterr().out


def test_changing_max_steps_runs_the_episode_again(tmp_path, capsys):
    out = tmp_path / "ev"
    assert evaluate(REFERENCE / "crate_dock", out, "--agent", "random", "--max-steps", "5") == 0
    capsys.readouterr()
    assert evaluate(REFERENCE / "crate_dock", out, "--agent", "random", "--max-steps", "3", "--resume") == 0
    shown = capsys.readouterr().out
    assert "0 already done, 1 run now" in shown and "the settings changed (1)" in shown
    latest = records(out)[-1]
    assert latest["steps"] == 3 and latest["settings"]["limits"]["max_steps"] == 3
    report = (out / "report.md").read_text()
    assert "1 episodes, 1 method(s)" in report  # the superseded record is not averaged in


def test_a_val_split_into_a_folder_of_test_episodes_is_reported_apart(tmp_path, capsys):
    out = tmp_path / "ev"
    assert main(["evaluate", str(REFERENCE / "crate_dock"), "--runs", "1", "--agent", "random", "--out", str(out)]) == 0
    test_episodes = len(records(out))
    capsys.readouterr()
    assert main(["evaluate", str(REFERENCE / "crate_dock"), "--runs", "1", "--agent", "random", "--split", "val",
                 "--out", str(out), "--resume", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    val_episodes = len(records(out)) - test_episodes
    assert test_episodes == 10 and val_episodes == 5
    assert summary["split"] == "val" and summary["envs"]["crate_dock"]["episodes"] == val_episodes
    assert summary["overall"]["episodes"] == val_episodes
    assert summary["mixed"] == ["This folder holds episodes of 2 splits (test, val); each is reported apart, "
                                "labelled [split]."]
    report = (out / "report.md").read_text()
    assert "| random [test] |" in report and "| random [val] |" in report
    assert "**Note:** This folder holds episodes of 2 splits (test, val)" in report
    methods = json.loads((out / "summary.json").read_text())["methods"]
    assert sorted((m["split"], m["overall"]["episodes"]) for m in methods) == [("test", 10), ("val", 5)]


def test_an_out_holding_episodes_needs_resume(tmp_path, capsys):
    out = tmp_path / "ev"
    assert evaluate(REFERENCE / "crate_dock", out, "--agent", "random") == 0
    before = (out / "episodes.jsonl").read_bytes()
    capsys.readouterr()
    assert evaluate(REFERENCE / "crate_dock", out, "--agent", "random") == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"envforge evaluate: error: --out {out}: it already holds an evaluation (episodes.jsonl); "
                           f"pass --resume to continue it (episodes recorded with other settings run again), or "
                           f"choose another --out")
    assert (out / "episodes.jsonl").read_bytes() == before


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return envforge(*args, cwd=cwd, traceback_ok=True)


def test_learn_on_a_missing_environment_writes_nothing(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    done = _cli("learn", "nonexistent_env", "--provider", "replay", cwd=work)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("envforge learn: error: nonexistent_env: expected an environment folder "
                                   "(env_main.py, config.yaml) or a folder holding some, found no such folder")
    assert not (work / "runs").exists()


def test_evaluate_on_a_missing_environment_writes_nothing(tmp_path):
    done = _cli("evaluate", "nonexistent_env", "--agent", "random", "--out", "ev", cwd=tmp_path)
    assert done.returncode == 2 and "found no such folder" in done.stderr
    assert not (tmp_path / "ev").exists()


def test_episodes_left_from_other_settings_are_reported_apart_and_said(tmp_path, capsys):
    out = tmp_path / "ev"
    flags = ("--runs", "1", "--agent", "random", "--out", str(out))
    assert main(["evaluate", str(REFERENCE / "crate_dock"), "--max-levels", "2", "--max-steps", "5", *flags]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(REFERENCE / "crate_dock"), "--max-levels", "1", "--max-steps", "3", *flags,
                 "--resume"]) == 0
    shown = capsys.readouterr().out
    assert "mean normalized" in shown and "over 1 episode(s)" in shown  # this run's settings only
    assert "note: random [settings 2]: one of several settings this method was run with here" in shown
    report = (out / "report.md").read_text()
    assert "| random [settings 1] |" in report and "| random [settings 2] |" in report
    assert '"max_steps": 3' in report and '"max_steps": 5' in report


def test_a_broken_env_exits_1_with_its_file_and_line_and_once_fixed_is_scored_on_resume(tmp_path, capsys):
    """Issue 16 cases 1 and 3: an env with a SyntaxError is an error naming the file and line (not
    exit 0 and 'stop: env_error'); after the fix, --resume plays its episodes again."""
    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    code = env / "env_main.py"
    good = code.read_text()
    code.write_text(good + "\ndef broken(:\n")
    out = tmp_path / "ev"
    assert evaluate(env, out, "--agent", "planner") == 1
    err = capsys.readouterr().err
    assert "1 episode(s) ended because the environment failed (env_error, left out of the scores)" in err
    assert f"SyntaxError: invalid syntax (env_main.py, line {len(good.splitlines()) + 2})" in err
    assert records(out)[-1]["stop_reason"] == "env_error"
    code.write_text(good)
    assert evaluate(env, out, "--agent", "planner", "--resume") == 0
    assert "0 already done, 1 run now" in capsys.readouterr().out
    assert records(out)[-1]["stop_reason"] == "solved" and records(out)[-1]["normalized"] == 1.0


TWO_LEVELS = ["evaluate", str(REFERENCE / "crate_dock"), "--max-levels", "2", "--runs", "1", "--agent", "random"]


def test_a_record_cut_short_is_set_aside_with_a_warning_and_its_episode_runs_again_once(tmp_path):
    """Issue 23 item 5: episodes.jsonl ending mid-line (a kill, a full disk) had --resume append
    onto the partial line; that episode became unreadable and ran again on every resume, silently."""
    out = tmp_path / "ev"
    first = envforge(*TWO_LEVELS, "--out", str(out))
    assert first.returncode == 0, first.stderr
    jsonl = out / "episodes.jsonl"
    whole, last = jsonl.read_text().splitlines(keepends=True)
    jsonl.write_text(whole + last[: len(last) // 2])  # the run was killed while writing the second record
    cut = last[: len(last) // 2]

    resumed = envforge(*TWO_LEVELS, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert (f"envforge: warning: {jsonl}: its last line was cut short (a killed run or a full disk); its "
            f"{len(cut.encode())} byte(s) were moved to episodes.jsonl.torn and the file goes on from the line before"
            ) in resumed.stderr
    assert "2 episode(s), 1 already done, 1 run now" in resumed.stdout
    assert (out / "episodes.jsonl.torn").read_text() == cut + "\n"
    rows = records(out)  # every line whole JSON again
    assert len(rows) == 2 and {r["level"] for r in rows} == {"levels/level_01.yaml", "levels/level_02.yaml"}

    again = envforge(*TWO_LEVELS, "--out", str(out), "--resume")
    assert "2 episode(s), 2 already done, 0 run now" in again.stdout
    assert "warning" not in again.stderr


def test_a_reader_that_does_not_append_skips_a_cut_line_and_says_so(tmp_path, capsys):
    from envforge.pipeline import records as files

    log = tmp_path / "calls.jsonl"
    files.append_jsonl(log, "model_call", {"stage": "design", "index": 1})
    with open(log, "a") as f:
        f.write('{"format": "envforge.model_call/1", "stage": "de')
    assert [entry["index"] for _, entry in files.read_jsonl(log, "model_call")] == [1]
    assert f"envforge: warning: {log}:2: expected a JSON record (envforge.model_call/1), found a line cut short; " \
           f"left out" in capsys.readouterr().err
    files.append_jsonl(log, "model_call", {"stage": "design", "index": 2})  # the appender sets the cut line aside
    assert [entry["index"] for _, entry in files.read_jsonl(log, "model_call")] == [1, 2]
    assert (tmp_path / "calls.jsonl.torn").read_text() == '{"format": "envforge.model_call/1", "stage": "de\n'
