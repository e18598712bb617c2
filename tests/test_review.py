"""`envforge review` on the bundled offline demo, as a person reviewing a run uses it.

The demo rejects the higher-or-lower card game at reliability (its reward pays for every guess,
so a random agent scores as well as the planner). A reviewer lists the run, reads why, fixes the
reward, retries from verification (no model needed) and gets an accepted environment; decides
by hand; and browses the HTML report in a real browser.
"""
from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
REJECTED = "a_card_game_of_higher_or_lower_against_406967"
ACCEPTED = ("a_lighthouse_keeper_must_keep_three_962115", "a_robot_in_a_dark_server_2ea2c6")
BUGGY_REWARD = 'events = ["guess_scored", "guess_right" if right else "guess_wrong"]'
FIXED_REWARD = 'events = ["guess_scored"] if right else ["guess_wrong"]'
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HEADLESS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture(scope="module")
def demo(generate_demo):
    """The README's offline demo, generated once for the session (conftest.py); tests that change it
    work on a copy."""
    assert generate_demo.returncode == 0, generate_demo.stdout + generate_demo.stderr
    return generate_demo.out


@pytest.fixture
def run(generate_demo, tmp_path):
    return generate_demo.copy_to(tmp_path / "run")


def row(stdout: str, name: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(name + " "))


def test_list_shows_the_rejected_env_with_its_stage_and_reason(demo, tmp_path):
    listed = envforge("review", "--out", str(demo), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.splitlines()[0].split()
    assert header == ["name", "theme", "status", "stage", "reason", "repair", "cost"]
    line = row(listed.stdout, REJECTED)
    assert " rejected " in line and " reliability " in line
    assert "one action repeated, not skill, earns the reward" in line
    assert "$0.0000" in line
    assert " accepted " in row(listed.stdout, ACCEPTED[0])
    assert "3 of 3 shown (2 accepted, 1 rejected)" in listed.stdout

    only = envforge("review", "list", "--out", str(demo), "--status", "rejected", cwd=tmp_path)
    assert [ln.split()[0] for ln in only.stdout.splitlines()[2:] if ln.strip()][:1] == [REJECTED]
    assert "1 of 3 shown" in only.stdout
    rows = json.loads(envforge("review", "--out", str(demo), "--stage", "reliability", "--reason", "NOT SKILL, EARNS",
                               "--json", cwd=tmp_path).stdout)
    assert [(r["name"], r["label"], r["stage"], r["repair_steps"], r["cost_usd"]) for r in rows] == \
        [(REJECTED, "rejected", "reliability", 0, 0.0)]
    ordered = json.loads(
        envforge("review", "--out", str(demo), "--sort", "name", "--reverse", "--json", cwd=tmp_path).stdout
    )
    assert [r["name"] for r in ordered] == sorted([REJECTED, *ACCEPTED], reverse=True)


def test_show_explains_why_the_reward_was_rejected(demo, tmp_path):
    shown = envforge("review", "show", REJECTED, "--out", str(demo), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert out.splitlines()[0] == f"{REJECTED}: rejected at reliability"
    assert "theme:  A card game of higher-or-lower" in out and "(themes.txt:3)" in out
    assert "== verification ==\n  rejected at reliability: reward: expected a reward that pays for skill" in out
    assert "random_normalized 1.0, planner_normalized 1.0" in out  # why: random play scores as well as search
    # what that means and what to run after fixing it (issue 23)
    assert "means:  the random agent scored the max on every level (15): the reward does not measure skill" in out
    assert "next:   make the reward pay for what the agent achieves" in out
    assert f"run `envforge review retry {REJECTED} --from verify --out {demo}` (no model needed)" in out
    assert "code, attempt 1: 3 step(s); changed env_main.py, env_obs.py" in out
    assert "ran check: passed" in out
    assert "== cost by stage ==" in out and "  verify              1  rejected" in out
    assert "== design.md ==\n  ## Goal" in out and "== config.yaml ==\n  meta:" in out
    details = json.loads(envforge("review", "show", REJECTED, "--out", str(demo), "--json", cwd=tmp_path).stdout)
    assert details["verification"]["stage"] == "reliability"
    assert details["agent"][0]["checks"] == ["passed"]
    assert BUGGY_REWARD in details["files"]["env_main.py"]
    assert f"envforge review retry {REJECTED} --from verify --out {demo}" in details["advice"]["next"]


def _next_commands(text: str, mark: str = "next:") -> list[list[str]]:
    """The envforge commands the `next:` line of `review show` (or the HTML report's "Next:") prints, as argv."""
    line = next(ln for ln in html.unescape(text).splitlines() if mark in ln)
    return [shlex.split(cmd)[1:] for cmd in re.findall(r"`(envforge [^`]*)`", line)]


def test_fixing_the_reward_and_running_the_printed_next_command_accepts_it_without_a_model(run, tmp_path):
    """The next command `review show` prints is complete: run as printed, from another folder, it
    retries the run it was printed for (issue 37: it left out --out and failed as copied)."""
    code = run / "_rejected" / REJECTED / "env_main.py"
    code.write_text(code.read_text().replace(BUGGY_REWARD, FIXED_REWARD))
    shown = envforge("review", "show", REJECTED, "--out", str(run), cwd=tmp_path).stdout
    (retry,) = _next_commands(shown)
    assert retry == ["review", "retry", REJECTED, "--from", "verify", "--out", str(run)]
    assert envforge("review", "html", str(tmp_path / "site"), "--out", str(run), "--previews", "0",
                    cwd=tmp_path).returncode == 0
    page = (tmp_path / "site" / "envs" / f"{REJECTED}.html").read_text()
    assert _next_commands(page, "<strong>Next:</strong>") == [retry]  # the report prints the same command
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    retried = envforge(*retry, cwd=elsewhere)
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert retried.stdout.splitlines()[0] == f"{REJECTED}: accepted -> {run / REJECTED}"
    assert not (run / "_rejected" / REJECTED).exists() and not (run / "_work" / REJECTED).exists()
    assert not (run / REJECTED / "rejection.json").exists()
    manifest = json.loads((run / REJECTED / "manifest.json").read_text())
    assert manifest["verification"]["accepted"] is True and "human_review" not in manifest
    assert len(list((run / REJECTED / "levels").glob("*.yaml"))) == 10

    assert " accepted " in row(envforge("review", "--out", str(run), cwd=tmp_path).stdout, REJECTED)
    shown = envforge("review", "show", REJECTED, "--out", str(run), cwd=tmp_path).stdout
    assert "== edited by hand (since the model wrote them) ==" in shown
    assert f"-    {BUGGY_REWARD}" in shown and f"+    {FIXED_REWARD}" in shown
    db = sqlite3.connect(run / "envforge.sqlite")
    assert [s for (s,) in db.execute("SELECT status FROM stage_attempts WHERE theme=? AND stage='verify' ORDER BY id",
                                     (REJECTED,))] == ["rejected", "done"]
    assert db.execute("SELECT status, stage FROM themes WHERE name=?", (REJECTED,)).fetchone() == (
        "accepted",
        "package",
    )
    assert json.loads(db.execute("SELECT args FROM runs ORDER BY id DESC").fetchone()[0])["command"] == "review retry"


def test_accept_and_reject_by_hand_are_recorded_and_shown_as_such(run, tmp_path):
    accepted = envforge(
        "review", "accept", REJECTED, "--reason", "streaks make it a fine toy", "--out", str(run), cwd=tmp_path
    )
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.startswith(f"{REJECTED}: accepted (by hand) -> {run / REJECTED}")
    manifest = json.loads((run / REJECTED / "manifest.json").read_text())
    assert manifest["human_review"]["decision"] == "accepted"
    assert manifest["human_review"]["reason"] == "streaks make it a fine toy" and manifest["human_review"]["at"]
    assert (
        json.loads((run / REJECTED / "rejection.json").read_text())["stage"] == "reliability"
    )  # the pipeline's verdict stays
    rejected = envforge("review", "reject", ACCEPTED[1], "--reason", "too easy", "--out", str(run), cwd=tmp_path)
    assert rejected.returncode == 0, rejected.stderr
    assert (
        json.loads((run / "_rejected" / ACCEPTED[1] / "manifest.json").read_text())["human_review"]["decision"]
        == "rejected"
    )
    assert not (run / ACCEPTED[1]).exists()

    listed = envforge("review", "--out", str(run), "--status", "by-hand", cwd=tmp_path).stdout
    assert "accepted (by hand)  reliability  accepted by hand: streaks make it a fine toy" in row(listed, REJECTED)
    assert "rejected (by hand)  review" in row(listed, ACCEPTED[1])
    shown = envforge("review", "show", REJECTED, "--out", str(run), cwd=tmp_path).stdout
    assert shown.splitlines()[0] == f"{REJECTED}: accepted (by hand)"
    assert "human review: accepted by hand at " in shown and "the pipeline rejected it at reliability" in shown
    html = envforge("review", "html", str(tmp_path / "site"), "--out", str(run), "--previews", "0", cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    assert '<span class="badge hand">accepted (by hand)</span>' in (tmp_path / "site" / "index.html").read_text()
    db = sqlite3.connect(run / "envforge.sqlite")
    assert db.execute("SELECT status, reason FROM themes WHERE name=?", (REJECTED,)).fetchone() == \
        ("accepted", "accepted by hand: streaks make it a fine toy")

    again = envforge("review", "accept", REJECTED, "--reason", "twice", "--out", str(run), cwd=tmp_path)
    assert again.returncode == 2 and f"{REJECTED} is already accepted (by hand)" in again.stderr
    undone = envforge("review", "reject", REJECTED, "--reason", "changed my mind", "--out", str(run), cwd=tmp_path)
    assert undone.returncode == 0
    line = row(envforge("review", "--out", str(run), cwd=tmp_path).stdout, REJECTED)
    assert " rejected  " in line and "(by hand)" not in line and "not skill, earns the reward" in line


def test_a_manifest_a_model_wrote_cannot_claim_a_decision_by_hand(run, tmp_path):
    from envforge.pipeline.generate.agent import ToolError, Workspace

    with pytest.raises(ToolError, match="cannot write 'manifest.json'"):
        Workspace(run / "_rejected" / REJECTED).write_file("manifest.json", '{"human_review": {}}')
    manifest = run / "_rejected" / REJECTED / "manifest.json"
    data = json.loads(manifest.read_text())
    data["human_review"] = {"decision": "accepted", "reason": "trust me", "at": "2026-01-01 00:00:00"}
    manifest.write_text(json.dumps(data))  # as if the environment's author had put it there
    listed = envforge("review", "--out", str(run), cwd=tmp_path).stdout
    assert " rejected " in row(listed, REJECTED) and "(by hand)" not in row(listed, REJECTED)
    assert "0 of 3 shown" in envforge("review", "--out", str(run), "--status", "by-hand", cwd=tmp_path).stdout
    shown = envforge("review", "show", REJECTED, "--out", str(run), cwd=tmp_path).stdout
    assert shown.splitlines()[0] == f"{REJECTED}: rejected at reliability" and "trust me" not in shown


def test_reject_then_accept_by_hand_keeps_every_human_decision_apart_from_the_pipelines(run, tmp_path):
    name = ACCEPTED[0]
    assert envforge("review", "reject", name, "--reason", "too easy", "--out", str(run), cwd=tmp_path).returncode == 0
    accepted = envforge(
        "review", "accept", name, "--reason", "on second thought, fine", "--out", str(run), cwd=tmp_path
    )
    assert accepted.returncode == 0, accepted.stderr
    review = json.loads((run / name / "manifest.json").read_text())["human_review"]
    assert (review["decision"], review["reason"], review["pipeline"]) == ("accepted", "on second thought, fine",
                                                                          "accepted")
    assert [(h["decision"], h["reason"]) for h in review["history"]] == [("rejected", "too easy")]
    assert " accepted " in row(envforge("review", "--out", str(run), cwd=tmp_path).stdout, name)
    shown = envforge("review", "show", name, "--out", str(run), cwd=tmp_path).stdout
    assert shown.splitlines()[0] == f"{name}: accepted"
    assert "human review: accepted by hand at " in shown and "(as the pipeline decided)" in shown


def test_table_2_counts_a_theme_a_person_fixed_and_retried_apart(run, tmp_path):
    code = run / "_rejected" / REJECTED / "env_main.py"
    code.write_text(code.read_text().replace(BUGGY_REWARD, FIXED_REWARD))
    assert envforge("review", "retry", REJECTED, "--from", "verify", "--out", str(run), cwd=tmp_path).returncode == 0
    html = envforge("review", "html", str(tmp_path / "site"), "--out", str(run), "--previews", "0", cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    assert "1 theme(s) a person fixed and retried (`review retry`) are counted apart." in index
    assert '<td class="num">2 / 2</td>' in index and '<td class="num">3 / 3</td>' not in index


def test_review_play_plays_the_rejected_env(demo, tmp_path):
    moves = tmp_path / "moves.txt"
    moves.write_text("guess higher\nguess lower\n")
    played = envforge("review", "play", REJECTED, "--actions", str(moves), "--out", str(demo), cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert f"== {REJECTED}: levels/level_01.yaml ==" in played.stdout
    assert "> guess higher" in played.stdout and "after 2 step(s): total reward" in played.stdout


@pytest.mark.parametrize("args", [["show", "nope"], ["retry", "nope", "--from", "verify"]])
def test_unknown_name_lists_the_known_ones(demo, tmp_path, args):
    done = envforge("review", *args, "--out", str(demo), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        f"no environment named 'nope' in {demo}; expected one of: {REJECTED}, {ACCEPTED[0]}, {ACCEPTED[1]}"
        in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_missing_folder_database_and_bad_requests_are_clear_errors(demo, tmp_path):
    cases = [
        (
            ["review", "--out", str(tmp_path / "none")],
            "expected the output folder of `envforge generate`, found no such folder",
        ),
        (["review", "show", REJECTED, "--out", str(tmp_path)], "expected a run database (envforge.sqlite) written by"),
        (["review", "html", str(tmp_path / "site"), "--out", str(tmp_path / "none")], "found no such folder"),
        (
            ["review", "accept", ACCEPTED[0], "--reason", "fine", "--out", str(demo)],
            f"{ACCEPTED[0]} is already accepted",
        ),
        (
            ["review", "reject", REJECTED, "--reason", " ", "--out", str(demo)],
            "--reason: expected a few words saying why",
        ),
    ]
    for args, expected in cases:
        done = envforge(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert expected in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


def plant(path: Path, what: str, secret: Path) -> None:
    path.unlink()
    if what == "symlink":
        os.symlink(secret, path)
    elif what == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)


@pytest.mark.parametrize("name, what", [("trajectory.jsonl", "symlink"), ("calls.jsonl", "fifo"),
                                        ("trajectory.jsonl", "dev_zero")])
def test_a_linked_or_special_record_in_a_theme_folder_is_refused_not_read(run, tmp_path, name, what):
    canary = f"CANARY-{os.getpid()}-{name}"
    secret = tmp_path / "secret.jsonl"  # a secret that even parses as the record it stands in for
    secret.write_text(json.dumps({"stage": "repair", "step": 1, "text": canary, "tool_calls": []}) + "\n")
    path = run / "_rejected" / REJECTED / name
    plant(path, what, secret)
    found = {"symlink": "a symbolic link (never followed)", "fifo": "a special file", "dev_zero": "a symbolic link"}
    for args in (["show", REJECTED], ["html", str(tmp_path / "site"), "--previews", "0"]):
        done = envforge("review", *args, "--out", str(run), cwd=tmp_path)  # a FIFO read would block for good
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"{path}: expected a regular envforge." in done.stderr and found[what] in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and canary not in done.stdout + done.stderr
    assert not [p for p in tmp_path.rglob("*.html") if canary in p.read_text()]


def test_a_linked_file_of_an_env_is_named_in_the_report_not_shown(run, tmp_path):
    canary = f"CANARY-{os.getpid()}-instruction"
    (tmp_path / "id_rsa").write_text(canary)
    instruction = run / "_rejected" / REJECTED / "agent_instruction.txt"
    plant(instruction, "symlink", tmp_path / "id_rsa")
    done = envforge("review", "html", str(tmp_path / "site"), "--out", str(run), "--previews", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / "envs" / f"{REJECTED}.html").read_text()
    assert "(not shown: agent_instruction.txt: expected a regular file inside the folder, found a symbolic link" in page
    assert not [p for p in (tmp_path / "site").rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]
    shown = envforge("review", "show", REJECTED, "--out", str(run), "--full", cwd=tmp_path)
    assert canary not in shown.stdout + shown.stderr


# -- the HTML report -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(demo, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review_site")
    done = envforge("review", "html", str(tmp / "site"), "--out", str(demo), cwd=tmp)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {tmp / 'site' / 'index.html'} (open it in a browser; no server needed)"
    return tmp / "site"


def test_report_is_static_and_self_contained(site, demo):
    pages = [site / "index.html", *sorted((site / "envs").glob("*.html"))]
    assert [p.stem for p in pages[1:]] == sorted([REJECTED, *ACCEPTED])
    for page in pages:
        text = page.read_text()
        assert "Content-Security-Policy" in text and "default-src 'none'" in text
        assert "<script" not in text and 'src="http' not in text and 'href="http' not in text
    page = (site / "envs" / f"{REJECTED}.html").read_text()
    assert '<span class="kw">def</span> <span class="fn">apply_action</span>' in page  # highlighted when written
    assert "Face-up card:" in page  # a level preview rendered by the environment in the sandbox
    assert 'src="data:image/png;base64,' in page  # the reliability plot, inline
    assert "<strong>What it means:</strong> the random agent scored the max on every level" in page
    assert f"run `envforge review retry {REJECTED} --from verify --out {demo}`" in page


def test_report_shows_evaluation_scores_of_the_envs(demo, tmp_path):
    evaluated = envforge("evaluate", str(demo), "--agent", "random", "--runs", "1", "--max-levels", "2", "--out",
                         str(tmp_path / "eval"), cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    done = envforge(
        "review",
        "html",
        str(tmp_path / "site"),
        "--out",
        str(demo),
        "--evaluation",
        str(tmp_path / "eval"),
        "--previews",
        "0",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / "envs" / f"{ACCEPTED[1]}.html").read_text()
    section = page[page.index('<h2 id="evaluation">'):page.index('<h2 id="levels">')]
    assert "<td>random</td>" in section and '<td class="num">2</td>' in section  # 2 episodes
    assert 'alt="evaluation scores" src="data:image/png;base64,' in section
    missing = envforge("review", "html", str(tmp_path / "site"), "--out", str(demo), "--evaluation",
                       str(tmp_path / "none"), cwd=tmp_path)
    assert missing.returncode == 2 and "expected the output folder of `envforge evaluate`" in missing.stderr


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={tmp / 'profile'}", *args], capture_output=True,
                          text=True, timeout=90)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (CI installs Debian's `chromium` package)")
def test_report_renders_in_a_real_browser(site, tmp_path):
    index = _chromium(tmp_path, "--dump-dom", (site / "index.html").as_uri())
    assert index.returncode == 0, index.stderr[-2000:]
    dom = index.stdout
    assert "Success per stage (the paper's Table 2 columns)" in dom
    for column in ("execution", "level generation", "reliability", "overall"):
        assert f"<th>{column}</th>" in dom
    assert '<td class="num">2 / 3</td>' in dom  # reliability and overall: the card game stops there
    assert f'<a href="envs/{REJECTED}.html">{REJECTED}</a>' in dom
    assert '<span class="badge rejected">rejected</span>' in dom

    page = _chromium(tmp_path, "--dump-dom", (site / "envs" / f"{REJECTED}.html").as_uri())
    assert page.returncode == 0, page.stderr[-2000:]
    assert "rejected at reliability" in page.stdout and "the reward does not measure skill" in page.stdout
    assert "Repair history" in page.stdout and "code, attempt 1: 3 step(s)" in page.stdout
    assert "Face-up card:" in page.stdout and '<span class="kw">class</span>' in page.stdout

    shot = tmp_path / "review_index.png"
    taken = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,900", (site / "index.html").as_uri())
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    assert _png_size(shot) == (1280, 900)
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_show_and_the_report_give_each_accepted_levels_difficulty(demo, tmp_path):
    shown = envforge("review", "show", ACCEPTED[0], "--out", str(demo), cwd=tmp_path).stdout
    section = shown.split("== difficulty (scores ", 1)[1].split("\n== ", 1)[0]
    assert "level_01.yaml: difficulty " in section and "shortest witness" in section and "nodes to max" in section
    done = envforge("review", "html", str(tmp_path / "site"), "--out", str(demo), "--previews", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert 'alt="levels of the run by difficulty"' in (tmp_path / "site" / "index.html").read_text()
    page = (tmp_path / "site" / "envs" / f"{ACCEPTED[0]}.html").read_text()
    assert "Per level: difficulty" in page and 'alt="levels by difficulty"' in page
