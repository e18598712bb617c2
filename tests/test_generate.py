"""`envforge generate`: what a researcher sees — folders, reasons, summary, exit status, resume."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli_kit import envforge

from envforge.pipeline.testing import replay_kit
from envforge.pipeline.testing.llm_server import Fault, Reply, rate_limited

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

BUG = {"env_main.py": ("step = 1 if", "step = 1 / 0 if")}


def generate(*args: str, env_extra: dict | None = None, timeout: int = 180) -> subprocess.CompletedProcess:
    """`envforge generate ARGS` offline (cli_kit.envforge); with `env_extra`, with this process's
    environment without keys or base URLs, plus `env_extra`, as its environment."""
    if env_extra is None:
        return envforge("generate", *args, timeout=timeout)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    return envforge("generate", *args, env={**env, **env_extra}, timeout=timeout)


@pytest.fixture
def corridors(tmp_path):
    """Three themes played by a scripted model: sound, fixed by repair, broken beyond repair."""
    return _corridors(tmp_path)


@pytest.fixture(scope="module")
def whole_corridors(tmp_path_factory):
    """The three corridor themes generated once, whole (`--json`): (their themes and replay, the
    output folder, the finished command). Read it; tests that resume or pause make their own."""
    tmp = tmp_path_factory.mktemp("whole_corridors")
    corridors = _corridors(tmp)
    return corridors, tmp / "out", run_corridors(corridors, tmp / "out", "--json")


def _corridors(tmp_path: Path) -> tuple[Path, Path]:
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "good")
    replay_kit.record_corridor(replay, "fixed", replace=BUG)
    replay_kit.record_corridor(replay, "broken", replace=BUG, give_up=True)
    themes = tmp_path / "themes.yaml"
    themes.write_text("- {name: good, theme: A corridor walk}\n"
                      "- {name: fixed, theme: A corridor walk whose first code has a bug}\n"
                      "- {name: broken, theme: A corridor walk whose bug the agent cannot fix}\n")
    return themes, replay


def run_corridors(corridors, out: Path, *extra: str) -> subprocess.CompletedProcess:
    themes, replay = corridors
    return generate("--themes", str(themes), "--out", str(out), "--provider", "replay", "--replay", str(replay),
                    "--levels", "6", "--concurrency", "1", *extra)


def test_accepts_repaired_env_and_rejects_unrepairable_one_with_located_reason(whole_corridors):
    _, out, result = whole_corridors
    summary = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr
    assert sorted(summary["accepted"]) == ["fixed", "good"]
    assert summary["rejected"]["broken"]["stage"] == "repair"
    assert "check still fails after 2 repair step(s): env_main.py:8: expected step(move(direction=" in \
        summary["rejected"]["broken"]["reason"]
    assert summary["rates"] == {"execution": 0.667, "level generation": 0.667, "reliability": 0.667, "overall": 0.667}
    for name in ("good", "fixed"):
        manifest = json.loads((out / name / "manifest.json").read_text())
        assert manifest["verification"]["accepted"] is True
        assert manifest["tags"] == {"reward": "binary", "observation": "full", "semantics": "aligned"}
        assert set(manifest["stages"]) == {"design", "dsl", "code", "repair", "verify"}
        assert len(list((out / name / "levels").glob("*.yaml"))) == 4
        assert len(list((out / name / "val_levels").glob("*.yaml"))) == 2
    assert json.loads((out / "good" / "manifest.json").read_text())["stages"]["repair"]["steps"] == 0
    # A step is a tool call run: edit_file, run_check, finish.
    assert json.loads((out / "fixed" / "manifest.json").read_text())["stages"]["repair"]["steps"] == 3
    rejection = json.loads((out / "_rejected" / "broken" / "rejection.json").read_text())
    assert rejection["stage"] == "repair" and rejection["details"]["problems"]
    assert not (out / "broken").exists() and list((out / "_work").iterdir()) == []
    db = sqlite3.connect(out / "envforge.sqlite")
    assert sorted(db.execute("SELECT name, status FROM themes")) == [("broken", "rejected"), ("fixed", "accepted"),
                                                                     ("good", "accepted")]


def test_summary_table_and_exit_status_when_nothing_is_accepted(tmp_path):
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "broken", replace=BUG, give_up=True)
    (tmp_path / "t.yaml").write_text("- {name: broken, theme: A corridor walk}\n")
    result = generate("--themes", str(tmp_path / "t.yaml"), "--out", str(tmp_path / "o"), "--provider", "replay",
                      "--replay", str(replay))
    assert result.returncode == 1
    assert "0 of 1 theme(s) accepted" in result.stdout
    assert "| execution | level generation | reliability | overall |" in result.stdout
    assert "rejected broken at repair: check still fails" in result.stdout


def test_killed_run_resumes_to_the_same_result_without_repeating_a_model_call(whole_corridors, tmp_path):
    corridors, _, whole_run = whole_corridors
    whole = json.loads(whole_run.stdout)
    out = tmp_path / "killed"
    themes, replay = corridors
    proc = subprocess.Popen([sys.executable, "-m", "envforge", "generate", "--themes", str(themes), "--out",
                             str(out), "--provider", "replay", "--replay", str(replay), "--levels", "6",
                             "--concurrency", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trajectory = out / "_work" / "fixed" / "trajectory.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill in the middle of the code stage, while its check runs
        lines = trajectory.read_text().splitlines() if trajectory.exists() else []
        if any('"run_check"' in ln and '"tool_calls"' in ln for ln in lines) and \
                not any('"tool": "run_check"' in ln for ln in lines):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "fixed").exists(), "a half-made theme must not be among the accepted"
    made_before = {p.name: len((p / "calls.jsonl").read_text().splitlines())
                   for p in [out / "good", *(out / "_work").iterdir()] if (p / "calls.jsonl").exists()}
    assert made_before["fixed"] == 4  # design, dsl and two code calls

    resumed = run_corridors(corridors, out, "--json", "--resume")
    summary = json.loads(resumed.stdout)
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(summary["accepted"]) == sorted(whole["accepted"])
    assert summary["rejected"] == whole["rejected"]
    # Every call was made exactly once over the two runs; the interrupted stage's calls
    # were answered from the journal (design and dsl were finished, so not even asked again).
    assert sum(made_before.values()) + summary["model_calls"]["made"] == whole["model_calls"]["made"]
    assert summary["model_calls"]["from_journal"] == 2


def test_supervised_pause_after_dsl_then_resume_uses_the_edited_dsl(corridors, tmp_path):
    out = tmp_path / "out"
    paused = run_corridors(corridors, out, "--pause-after", "dsl", "--json")
    assert paused.returncode == 0
    assert sorted(json.loads(paused.stdout)["paused"]) == ["broken", "fixed", "good"]
    config = out / "_work" / "good" / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    doc["meta"]["description"] = "Edited by a person: walk to the goal."
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    bad = out / "_work" / "fixed" / "config.yaml"
    bad.write_text(bad.read_text().replace("value_key: goal_rewards", "value_key: no_such_map"))
    run = run_corridors(corridors, out, "--resume", "--json")
    resumed = json.loads(run.stdout)
    assert "good" in resumed["accepted"]
    assert "Edited by a person" in (out / "good" / "config.yaml").read_text()
    # The person's typo is theirs to fix, not the model's dsl rejection: the theme stays paused.
    assert run.returncode == 2 and "fixed" not in resumed["rejected"] and resumed["paused"] == ["fixed"]
    wrong = resumed["edit_errors"]["fixed"]
    assert wrong.startswith(f"{bad}: expected a valid DSL document after your edit, found 1 error(s); first: ")
    assert "reward.events[0].value_key" in wrong
    assert f"envforge generate: fixed stays paused: {wrong}" in run.stderr
    bad.write_text(bad.read_text().replace("value_key: no_such_map", "value_key: goal_rewards"))
    again = json.loads(run_corridors(corridors, out, "--resume", "--json").stdout)
    assert "fixed" in again["accepted"] and again["edit_errors"] == {}


def test_an_existing_run_needs_resume(corridors, tmp_path):
    out = tmp_path / "out"
    run_corridors(corridors, out, "--pause-after", "design")
    again = run_corridors(corridors, out)
    assert again.returncode == 2
    assert "already holds a run (envforge.sqlite); pass --resume to continue it" in again.stderr


@pytest.mark.parametrize("content, expected", [
    (None, "expected a file of themes (one per line, or a YAML list), found no such file"),
    (b"\n# only a comment\n\n", "expected at least one theme (blank lines and # comments are ignored), found none"),
    (b"a fine theme\nbad \xff byte\n", ":2: expected UTF-8 text, found byte 0xff that is not valid UTF-8"),
    (b"- {theme: x, colour: red}\n", "expected only the fields ['name', 'notes', 'tags', 'theme'], found ['colour']"),
])
def test_bad_themes_file_is_a_clear_error(tmp_path, content, expected):
    themes = tmp_path / "themes.txt"
    if content is not None:
        themes.write_bytes(content)
    result = generate("--themes", str(themes), "--out", str(tmp_path / "out"), "--provider", "replay")
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_overlong_theme_is_rejected_at_input_and_an_errored_theme_is_named_beside_table_2(tmp_path):
    themes = tmp_path / "themes.txt"
    themes.write_text("A maze\nA  MAZE\n" + "x" * 10_000 + "\n")
    result = generate("--themes", str(themes), "--out", str(tmp_path / "out"), "--provider", "replay",
                      "--replay", str(tmp_path))
    assert "themes.txt:2: the same theme as themes.txt:1; merged with it (run and counted once)" in result.stderr
    assert "rejected xxxxxxxx" in result.stdout
    assert "theme is 10000 characters long; expected at most 2000" in result.stdout
    # No recording of "A maze" in this folder: an error of the setup, not a verdict on the theme (issue 16),
    # and the note under Table 2 says it is left out.
    assert "(over the 1 theme(s) judged; 1 ended in an error, not a verdict, and are left out: a_maze_9c00aa)" \
        in result.stdout
    assert "no recording of the theme 'A maze' in the replay folder" in result.stderr
    assert result.returncode == 2
    again = generate("--themes", str(themes), "--out", str(tmp_path / "again"), "--provider", "replay",
                     "--replay", str(tmp_path), "--json")
    summary = json.loads(again.stdout)
    assert summary["themes"] == 2 and list(summary["errors"]) == ["a_maze_9c00aa"]
    assert summary["errors"]["a_maze_9c00aa"]["stage"] == "design"
    assert [n[:3] for n in summary["rejected"]] == ["xxx"]


def test_unwritable_output_folder_is_a_clear_error(tmp_path):
    (tmp_path / "themes.txt").write_text("A maze\n")
    (tmp_path / "file").write_text("not a folder")
    result = generate("--themes", str(tmp_path / "themes.txt"), "--out", str(tmp_path / "file" / "out"),
                      "--provider", "replay")
    assert result.returncode == 2
    assert "--out" in result.stderr and "expected a folder envforge can write" in result.stderr


def test_provider_answering_nonsense_and_failing_rejects_every_theme_at_a_named_stage(llm_server, llm_env, tmp_path):
    llm_server.rule = lambda n: rate_limited("0") if n % 3 == 0 else (
        Fault(status=500, message="upstream broke") if n % 7 == 0 else Reply("Sure! Here is a poem about the sea."))
    themes = tmp_path / "themes.txt"
    themes.write_text("A maze with keys\nA garden to water\n")
    result = generate("--themes", str(themes), "--out", str(tmp_path / "out"), "--model", "openai/gpt-4o-mini",
                      "--base-url", llm_server.openai_url, "--json",
                      env_extra={"OPENAI_API_KEY": "test-key", "ENVFORGE_CACHE": str(llm_env / "c.sqlite"),
                                 "ENVFORGE_RETRY_BASE_DELAY": "0.01", "NO_PROXY": "127.0.0.1"})
    summary = json.loads(result.stdout)
    assert result.returncode == 1, result.stderr
    assert summary["accepted"] == []
    assert {r["stage"] for r in summary["rejected"].values()} <= {"design", "dsl"}
    assert len(summary["rejected"]) == 2
    assert all(r["reason"] for r in summary["rejected"].values())
    assert "cost summary" in result.stderr


def test_run_budget_stops_before_the_cap_and_says_so(llm_server, llm_env, tmp_path):
    # Realistic usage: no more input tokens than the prompt's size suggests, output within max_tokens.
    llm_server.rule = lambda n: Reply("## Goal\n" + "A long design. " * 40, input_tokens=500, output_tokens=3_000)
    themes = tmp_path / "themes.txt"
    themes.write_text("A maze with keys\nA garden to water\nA lighthouse\n")
    result = generate("--themes", str(themes), "--out", str(tmp_path / "out"), "--model", "openai/gpt-4o-mini",
                      "--base-url", llm_server.openai_url, "--budget-usd", "0.01", "--concurrency", "1", "--json",
                      env_extra={"OPENAI_API_KEY": "test-key", "ENVFORGE_CACHE": str(llm_env / "c.sqlite"),
                                 "NO_PROXY": "127.0.0.1"})
    assert result.returncode == 3, result.stderr
    summary = json.loads(result.stdout)
    assert 0 < summary["cost_usd"] <= 0.01
    assert any("budget exceeded" in r["reason"] for r in summary["rejected"].values())
    assert summary["skipped"], "themes after the cap are not started"
    assert "run budget" in result.stderr
    stopped = [name for name, r in summary["rejected"].items() if "budget exceeded" in r["reason"]]
    for name in stopped:  # the run database records the cap that stopped it, and review reads that
        cause, means, nxt = _budget_advice(tmp_path / "out", name)
        assert (cause.scope, cause.cap_usd) == ("run", 0.01) and cause.spent_usd + cause.estimate_usd > 0.01
        assert means.startswith("means:  the run's budget cap (--budget-usd) stopped its model calls")
        # complete as printed: the run's themes, model and base URL (the resume below runs it with 5)
        assert (f"`envforge generate --themes {themes} --model openai/gpt-4o-mini --base-url {llm_server.openai_url} "
                f"--out {tmp_path / 'out'} --resume --budget-usd 0.02`") in nxt
    # Table 2 counts only the themes judged: one the budget stopped, or never started, is not rejected
    assert summary["not_judged"] == stopped and len(summary["skipped"]) + len(stopped) == 3
    assert summary["rates"]["overall"] is None
    assert "budget exceeded: budget exceeded" not in result.stderr + result.stdout

    # A budget stop is not a finding about the theme: --resume with a bigger budget goes on from there.
    resumed = generate("--themes", str(themes), "--out", str(tmp_path / "out"), "--model", "openai/gpt-4o-mini",
                       "--base-url", llm_server.openai_url, "--budget-usd", "5", "--concurrency", "1", "--json",
                       "--resume", env_extra={"OPENAI_API_KEY": "test-key", "ENVFORGE_CACHE": str(llm_env / "c.sqlite"),
                                              "NO_PROXY": "127.0.0.1"})
    assert resumed.returncode in (0, 1), resumed.stderr
    again = json.loads(resumed.stdout)
    assert not [r for r in again["rejected"].values() if "budget exceeded" in r["reason"]], again["rejected"]
    assert not again["skipped"]
    for name in stopped:
        assert f"{name}: stopped by the run budget at" in resumed.stderr


def test_a_theme_stopped_by_its_own_budget_stays_rejected_on_resume(llm_server, llm_env, tmp_path):
    """The theme cap is what the theme may cost: a resume does not give it a fresh one."""
    llm_server.rule = lambda n: Reply("## Goal\n" + "A long design. " * 40, input_tokens=500, output_tokens=3_000)
    themes = tmp_path / "themes.txt"
    themes.write_text("A maze with keys\n")
    argv = ["--themes", str(themes), "--out", str(tmp_path / "out"), "--model", "openai/gpt-4o-mini",
            "--base-url", llm_server.openai_url, "--theme-budget-usd", "0.005", "--json"]
    env = {"OPENAI_API_KEY": "test-key", "ENVFORGE_CACHE": str(llm_env / "c.sqlite"), "NO_PROXY": "127.0.0.1"}
    first = generate(*argv, env_extra=env)
    assert [r["reason"] for r in json.loads(first.stdout)["rejected"].values()][0].startswith("budget exceeded")
    [name] = json.loads(first.stdout)["rejected"]
    cause, means, nxt = _budget_advice(tmp_path / "out", name)
    assert (cause.scope, cause.cap_usd) == ("theme", 0.005)
    assert means == ("means:  its model calls reached a budget cap before the stage finished; nothing is wrong with "
                     "it yet")
    assert nxt.endswith("with a model and a larger --theme-budget-usd")
    calls = len(llm_server.requests)
    again = generate(*argv, "--resume", env_extra=env)
    rejected = json.loads(again.stdout)["rejected"]
    assert [r["reason"] for r in rejected.values()][0].startswith("budget exceeded"), again.stderr
    assert "stopped by the run budget" not in again.stderr and len(llm_server.requests) == calls


def _budget_advice(out: Path, name: str):
    """The typed cause review reads for `name` (a BudgetCapReached), and what `review show` says it means."""
    from envforge.pipeline.kinds import BudgetCapReached
    from envforge.pipeline.review import show
    from envforge.pipeline.review.catalog import Catalog
    from envforge.pipeline.review.details import gather

    with Catalog.open(out) as catalog:
        entry = catalog.get(name)
        lines = show.explain(gather(entry)).splitlines()
    assert isinstance(entry.cause, BudgetCapReached), entry.cause
    said = {ln.split(":", 1)[0]: ln for ln in lines if ln.startswith(("means:", "next:"))}
    return entry.cause, said["means"], said["next"]


def test_resume_refuses_themes_made_with_other_settings(corridors, tmp_path):
    """A stored stage is reused only when everything that determined it matches: the levels, the
    seed, the model, the verification models, the theme's text and the envforge version."""
    out = tmp_path / "out"
    assert run_corridors(corridors, out, "--pause-after", "design").returncode == 0
    db = sqlite3.connect(out / "envforge.sqlite")
    runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    other = run_corridors(corridors, out, "--resume", "--seed", "7")
    assert other.returncode == 2, other.stderr
    assert "--resume: good in" in other.stderr and "was made with other settings: seed 0 (now 7)" in other.stderr
    assert "Traceback" not in other.stderr
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == runs  # nothing recorded, nothing run
    stored = json.loads(db.execute("SELECT determined_by FROM themes WHERE name='good'").fetchone()[0])
    db.execute("UPDATE themes SET determined_by=? WHERE name='good'", (json.dumps({**stored, "envforge": "0.0.1"}),))
    db.commit()
    older = run_corridors(corridors, out, "--resume", "--pause-after", "design")
    assert older.returncode == 2
    assert "good in" in older.stderr and "envforge '0.0.1' (now '" in older.stderr
    db.execute("UPDATE themes SET determined_by=? WHERE name='good'", (json.dumps(stored),))
    db.commit()
    same = run_corridors(corridors, out, "--resume", "--json")
    assert same.returncode == 0, same.stderr
    assert sorted(json.loads(same.stdout)["accepted"]) == ["fixed", "good"]
    edited = tmp_path / "edited.yaml"
    edited.write_text(corridors[0].read_text().replace("A corridor walk}", "A corridor run}"))
    changed = generate("--themes", str(edited), "--out", str(out), "--provider", "replay", "--replay",
                       str(corridors[1]), "--levels", "6", "--resume")
    assert changed.returncode == 2
    assert "good in" in changed.stderr and "theme 'A corridor walk' (now 'A corridor run')" in changed.stderr
