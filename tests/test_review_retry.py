"""`envforge review retry` from a model stage, offline with the replay provider: the coding agent
gave up on a bug; a person fixes it and retries from repair; the environment is accepted."""
from __future__ import annotations

import json
import sqlite3

import pytest
from cli_kit import envforge
from test_review import row

from envforge.pipeline.testing import replay_kit

pytestmark = pytest.mark.slow  # measured: generate, then review retry's whole pipeline, in each test

BUG = {"env_main.py": ("step = 1 if", "step = 1 iff")}  # a syntax error: check stops at the import


@pytest.fixture
def broken(tmp_path):
    """A corridor whose bug the coding agent cannot find: rejected at repair."""
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "broken", replace=BUG, give_up=True)
    (tmp_path / "themes.yaml").write_text("- {name: broken, theme: A corridor walk whose bug the agent cannot fix}\n")
    done = envforge("generate", "--themes", str(tmp_path / "themes.yaml"), "--out", str(tmp_path / "out"),
                    "--provider", "replay", "--replay", str(replay), "--levels", "6", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    return tmp_path / "out", replay


def test_retry_from_repair_after_a_fix_turns_the_rejected_env_into_an_accepted_one(broken, tmp_path):
    out, replay = broken
    assert "rejected  repair  check still fails after 2 repair step(s): env_main.py:8" in row(
        envforge("review", "--out", str(out), cwd=tmp_path).stdout, "broken")

    early = envforge("review", "retry", "broken", "--from", "verify", "--out", str(out), cwd=tmp_path)
    assert early.returncode == 2
    assert "broken: --from verify keeps the stages before it, but repair has not passed" in early.stderr
    assert (out / "_rejected" / "broken").is_dir()  # nothing moved

    code = out / "_rejected" / "broken" / "env_main.py"
    code.write_text(code.read_text().replace(*reversed(BUG["env_main.py"])))
    retried = envforge("review", "retry", "broken", "--from", "repair", "--out", str(out), "--provider", "replay",
                       "--replay", str(replay), "--json", cwd=tmp_path)
    assert retried.returncode == 0, retried.stdout + retried.stderr
    entry = json.loads(retried.stdout)
    assert (entry["label"], entry["stage"], entry["folder"], entry["repair_steps"]) == \
        ("accepted", "package", str(out / "broken"), 0)  # the check passed, so the agent was not asked
    assert json.loads((out / "broken" / "manifest.json").read_text())["verification"]["accepted"] is True

    db = sqlite3.connect(out / "envforge.sqlite")
    attempts = list(db.execute("SELECT stage, status FROM stage_attempts WHERE theme='broken' ORDER BY id"))
    assert attempts == [("design", "done"), ("dsl", "done"), ("code", "done"), ("repair", "rejected"),
                        ("repair", "done"), ("verify", "done")]
    journal = [json.loads(line) for line in (out / "broken" / "calls.jsonl").read_text().splitlines()]
    assert [c["stage"] for c in journal] == ["design", "dsl", "code", "code", "code"]  # repair's old calls forgotten
    shown = envforge("review", "show", "broken", "--out", str(out), cwd=tmp_path).stdout
    assert "repair, attempt 1: 2 step(s); changed nothing" in shown
    assert "-            step = 1 iff" in shown and "+            step = 1 if" in shown



def test_retrying_an_env_accepted_by_hand_lets_the_pipeline_decide_with_the_runs_level_count(broken, tmp_path):
    out, replay = broken
    accepted = envforge("review", "accept", "broken", "--reason", "I will fix it", "--out", str(out), cwd=tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    code = out / "broken" / "env_main.py"
    code.write_text(code.read_text().replace(*reversed(BUG["env_main.py"])))
    retried = envforge("review", "retry", "broken", "--from", "repair", "--out", str(out), "--provider", "replay",
                       "--replay", str(replay), cwd=tmp_path)
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert retried.stdout.startswith(f"broken: accepted -> {out / 'broken'}")  # by the pipeline now, not by hand
    assert "human_review" not in json.loads((out / "broken" / "manifest.json").read_text())
    assert len(list((out / "broken" / "levels").glob("*.yaml"))) == 4  # generate's --levels 6: 4 test, 2 validation
    assert len(list((out / "broken" / "val_levels").glob("*.yaml"))) == 2
