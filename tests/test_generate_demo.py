"""The bundled offline demo of `envforge generate`, run exactly as a newcomer without a key runs it.

examples/themes.txt holds three themes; examples/replay/ holds the hand-written recordings of the
model's part (design, DSL with one checker correction, a coding agent that fixes the bug the
check finds). Everything else is the real pipeline: check, verification and packaging. Two
environments must be accepted and one rejected for a reason the pipeline found itself.
"""
from __future__ import annotations

import json

import pytest
from cli_kit import envforge

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ACCEPTED = ("a_lighthouse_keeper_must_keep_three_962115", "a_robot_in_a_dark_server_2ea2c6")
REJECTED = "a_card_game_of_higher_or_lower_against_406967"


@pytest.fixture(scope="module")
def demo(generate_demo):
    """The session's one run of the demo (conftest.py): what it printed, and its output folder."""
    return generate_demo, generate_demo.out, generate_demo.out.parent


def test_demo_exits_zero_and_prints_table_2(demo):
    done, out, _ = demo
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 3 theme(s) accepted" in done.stdout
    assert "| execution | level generation | reliability | overall |" in done.stdout
    assert "| 100% | 100% | 67% | 67% |" in done.stdout, done.stdout
    assert f"rejected {REJECTED} at reliability" in done.stdout
    assert "16 call(s) replayed from recordings" in done.stdout


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_envs_are_verified_and_packaged(demo, name):
    _, out, _ = demo
    env = out / name
    manifest = json.loads((env / "manifest.json").read_text())
    verification = json.loads((env / "verification.json").read_text())
    assert verification["accepted"] is True, verification["reason"]
    assert manifest["verification"]["accepted"] is True
    assert manifest["name"] == name and manifest["origin"] == "envforge generate"
    assert set(manifest["stages"]) == {"design", "dsl", "code", "repair", "verify"}
    assert len(list((env / "levels").glob("*.yaml"))) == 10
    assert len(list((env / "val_levels").glob("*.yaml"))) == 5
    reliability = verification["stages"]["reliability"]
    assert reliability["planner_normalized"] - reliability["random_normalized"] > reliability["margin"]
    assert not (out / "_rejected" / name).exists()


def test_recorded_stories_happened(demo):
    """The DSL checker's correction (lighthouse) and the check-driven bug fix (server room) were
    really driven by the pipeline: a second DSL call, and a failing then passing run_check."""
    _, out, _ = demo
    lighthouse = [json.loads(line) for line in (out / ACCEPTED[0] / "calls.jsonl").read_text().splitlines()]
    assert [c["index"] for c in lighthouse if c["stage"] == "dsl"] == [1, 2]
    steps = [json.loads(line) for line in (out / ACCEPTED[1] / "trajectory.jsonl").read_text().splitlines()]
    checks = [s["result"] for s in steps if s.get("tool") == "run_check"]
    assert len(checks) == 2
    assert checks[0].startswith("check failed") and "KeyError in apply_action(): 'direction'" in checks[0]
    assert checks[1].startswith("check passed")
    assert not any(s["stage"] == "repair" for s in steps)  # the check passed, so no repair calls


def test_rejected_env_fails_reliability_not_earlier(demo):
    _, out, _ = demo
    rejected = out / "_rejected" / REJECTED
    rejection = json.loads((rejected / "rejection.json").read_text())
    assert rejection["stage"] == "reliability"
    # Always guessing one way wins this card game: the constant-action baseline names that policy.
    assert "repeating guess(call=" in rejection["reason"] and "planner" in rejection["reason"]
    assert "not skill, earns the reward" in rejection["reason"]
    figures = rejection["details"]["verification"]["stages"]
    assert figures["levels"]["generated_kept"] == 15  # level generation passed: 15 distinct valid levels
    assert not (out / REJECTED).exists()


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_envs_pass_check_on_their_own(demo, name, tmp_path):
    _, out, _ = demo
    done = envforge("check", out / name, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok:"), done.stdout


def test_the_verify_stage_says_what_it_is_doing_as_it_goes(demo):
    """Issue 23: generate's verify stage was silent until it ended; each of its stages is a line."""
    done, _, _ = demo
    for stage in ("execution", "levels", "reliability"):
        assert f"{ACCEPTED[0]}: verify: {stage}..." in done.stderr, done.stderr
    assert f"{ACCEPTED[0]}: verify: model-free stages passed after " in done.stderr
    assert f"{REJECTED}: verify: rejected at reliability after " in done.stderr
