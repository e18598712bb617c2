"""`envforge generate`: stages declared once, model-driven verification inside generate, folder
names and replay keyed on the whole theme, infrastructure faults as errors, Ctrl-C."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys

import pytest
from cli_kit import envforge
from test_generate import BUG, generate

from envforge.pipeline.generate import stages
from envforge.pipeline.paths import TEMPLATES_DIR
from envforge.pipeline.review import actions, catalog
from envforge.pipeline.testing import replay_kit
from envforge.pipeline.testing.llm_server import Reply


def test_every_stage_list_is_read_from_the_one_declaration():
    assert stages.NAMES == ("design", "dsl", "code", "repair", "verify")
    assert actions.RETRY_STAGES == stages.NAMES
    assert stages.PAUSABLE == ("design", "dsl")
    assert catalog.STAGE_ORDER == ("input", "design", "dsl", "code", "repair", "verify", "execution", "levels",
                                   "reliability", "review", "package")
    assert stages.table2() == {"execution": ("input", "design", "dsl", "code", "repair", "verify", "execution"),
                               "level generation": ("levels",), "reliability": ("reliability",)}
    assert [s.name for s in stages.STAGES if s.needs_model] == ["design", "dsl", "code", "repair"]
    help_text = envforge("generate", "--help").stdout
    assert "{design,dsl}" in help_text


@pytest.mark.slow  # measured: whole generate runs with verification
def test_stage_reports_name_how_each_stage_ended(tmp_path):
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "fixed", replace=BUG)
    replay_kit.record_corridor(replay, "broken", replace=BUG, give_up=True)
    themes = tmp_path / "t.yaml"
    themes.write_text("- {name: fixed, theme: A corridor walk with a bug}\n"
                      "- {name: broken, theme: A corridor walk whose bug stays}\n")
    out = tmp_path / "out"
    result = generate("--themes", str(themes), "--out", str(out), "--provider", "replay", "--replay", str(replay),
                      "--levels", "6", "--concurrency", "1", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads((out / "fixed" / "manifest.json").read_text())["stages"]
    assert {k: v["exit_status"] for k, v in record.items()} == {
        "design": "done", "dsl": "accepted", "code": "finished", "repair": "finished", "verify": "accepted"}
    rejection = json.loads((out / "_rejected" / "broken" / "rejection.json").read_text())
    assert rejection["stages"]["repair"]["exit_status"] == "finished"  # the agent said finish; check still failed
    assert rejection["details"]["exit_status"] == "finished" and rejection["details"]["steps"] == 2


def separating(n, request):
    """The strong model walks towards G (it reads the corridor from the observation); the weak one
    answers prose with no action."""
    if request["body"].get("model") != "strong-model":
        return Reply("I am not sure what to do here.")
    corridors = re.findall(r"step \d+: ([.@G]+)", json.dumps(request["body"].get("messages")))
    cells = corridors[-1] if corridors else "@G"
    direction = "right" if cells.find("@") < cells.find("G") else "left"
    return Reply('<thinking_memory>walk to G</thinking_memory>\n<action>{"action": "move", "params": '
                 f'{{"direction": "{direction}"}}}}</action>')


def generate_verified(tmp_path, llm_server, llm_env, rule, *extra):
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "good")
    themes = tmp_path / "t.yaml"
    themes.write_text("- {name: good, theme: A corridor walk}\n")
    llm_server.rule = rule
    out = tmp_path / "out"
    result = generate("--themes", str(themes), "--out", str(out), "--provider", "replay", "--replay", str(replay),
                      "--levels", "6", "--json", *extra,
                      env_extra={"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": llm_server.openai_url,
                                 "ENVFORGE_CACHE": str(llm_env / "c.sqlite"), "NO_PROXY": "127.0.0.1",
                                 "ENVFORGE_RETRY_BASE_DELAY": "0.01",
                                 "ENVFORGE_VERIFY_MODELS": "openai/weak-model,openai/strong-model"})
    return out, result


def test_generate_runs_the_model_driven_verification_when_models_are_configured(tmp_path, llm_server, llm_env):
    out, result = generate_verified(tmp_path, llm_server, llm_env, separating)  # models from the setting
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["accepted"] == ["good"]
    stages_run = json.loads((out / "good" / "verification.json").read_text())["stages"]
    assert stages_run["execution_react"]["model"] == "openai/strong-model"
    assert stages_run["reliability_models"]["strong_normalized"] == 1.0
    assert stages_run["reliability_models"]["weak_normalized"] == 0.0


@pytest.mark.slow  # measured: whole generate runs with verification
def test_generate_rejects_at_reliability_when_the_models_score_alike(tmp_path, llm_server, llm_env):
    out, result = generate_verified(tmp_path, llm_server, llm_env, lambda n: Reply("No idea."),
                                    "--verify-models", "openai/weak-model,openai/strong-model")
    summary = json.loads(result.stdout)
    assert result.returncode == 1
    assert summary["rejected"]["good"]["stage"] == "reliability"
    assert "the reward does not measure skill" in summary["rejected"]["good"]["reason"]
    assert summary["rates"] == {"execution": 1.0, "level generation": 1.0, "reliability": 0.0, "overall": 0.0}


def test_verify_models_needs_one_or_two_specs(tmp_path):
    (tmp_path / "t.txt").write_text("A maze\n")
    result = generate("--themes", str(tmp_path / "t.txt"), "--out", str(tmp_path / "o"), "--provider", "replay",
                      "--verify-models", "a,b,c")
    assert result.returncode == 2
    assert "--verify-models: expected MODEL or WEAK,STRONG (model specs), found 'a,b,c'" in result.stderr
    assert not (tmp_path / "o").exists()


def test_themes_sharing_their_first_words_get_their_own_folders_and_recordings(tmp_path):
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "walk")
    recorded = "A corridor walk along a long hall to the goal"
    (replay / "walk" / "theme.txt").write_text(recorded + "\n")
    themes = tmp_path / "themes.txt"
    themes.write_text(f"{recorded}\nA corridor walk along a long hall full of traps\n")
    out = tmp_path / "out"
    result = generate("--themes", str(themes), "--out", str(out), "--provider", "replay", "--replay", str(replay),
                      "--levels", "6", "--concurrency", "1", "--json")
    summary = json.loads(result.stdout)
    assert summary["accepted"] == ["a_corridor_walk_along_a_long_6046e9"]
    assert json.loads((out / summary["accepted"][0] / "manifest.json").read_text())["theme"] == recorded
    # The other theme is not served the recorded one's environment: it has no recording, which is
    # an error of the setup (exit 2, one line naming it and the folder), not counted in Table 2.
    assert summary["rejected"] == {}
    assert list(summary["errors"]) == ["a_corridor_walk_along_a_long_89a569"]
    assert summary["rates"]["overall"] == 1.0
    assert result.returncode == 2
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("envforge generate:")]
    assert "no recording of the theme 'A corridor walk along a long hall full of traps' in the replay folder " \
           f"{replay}" in line


def test_a_template_missing_from_the_installation_is_an_error_not_a_verdict(tmp_path):
    """As a wheel that left out templates/ would be: envforge's templates folder lacks one."""
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, templates)
    (templates / "generate" / "design.j2").unlink()
    themes = tmp_path / "themes.txt"
    themes.write_text("A lighthouse keeper must keep three lamps fuelled during a storm; fuel is carried from a "
                      "shed and lamps burn down each step; reward for each step all lamps are lit.\n")
    installed_without = ("import sys; import envforge.pipeline.paths as p; "
                         f"p.TEMPLATES_DIR = p.Path({str(templates)!r}); "
                         "from envforge.pipeline.cli import main; sys.exit(main())")
    result = subprocess.run([sys.executable, "-c", installed_without, "generate", "--themes", str(themes), "--out",
                             str(tmp_path / "out"), "--provider", "replay", "--json"],
                            capture_output=True, text=True, timeout=120)
    summary = json.loads(result.stdout)
    assert result.returncode == 2, result.stderr
    assert summary["rejected"] == {} and summary["rates"]["overall"] is None
    [error] = summary["errors"].values()
    assert error["stage"] == "design" and "the prompt template generate/design.j2 is missing" in error["reason"]
    assert "Traceback" not in result.stderr


def _corridor_command(tmp_path):
    """The generate command of one replayed corridor theme ("good") into tmp_path/out, and that folder."""
    replay = tmp_path / "replay"
    replay_kit.record_corridor(replay, "good")
    themes = tmp_path / "t.yaml"
    themes.write_text("- {name: good, theme: A corridor walk}\n")
    out = tmp_path / "out"
    return [sys.executable, "-m", "envforge", "generate", "--themes", str(themes), "--out", str(out),
            "--provider", "replay", "--replay", str(replay), "--levels", "6"], out


def test_ctrl_c_says_what_it_waits_for_and_a_second_one_stops_at_once_quietly(tmp_path):
    command, out = _corridor_command(tmp_path)
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # progress lines; interrupt while verification runs in the sandbox
        seen.append(line)
        if "good: verify..." in line:
            break
    proc.send_signal(signal.SIGINT)
    for line in proc.stderr:
        seen.append(line)
        if "interrupted" in line:
            break
    message = seen[-1]
    assert "envforge generate: interrupted; waiting for the stage(s) in progress: good (verify) to finish" in message
    # the command as typed, with --resume: the replay flags too, without which the hint would not resume
    assert f"(its work is kept, so `{shlex.join(['envforge', *command[3:], '--resume'])}` does not repeat it); press " \
           f"Ctrl-C again to stop at once" in message
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait() == 130
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    resumed = subprocess.run(command + ["--resume", "--json"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["accepted"] == ["good"]


def test_ctrl_c_keeps_the_stage_it_waited_for_so_resume_does_not_run_it_again(tmp_path):
    """One Ctrl-C while verify runs in the sandbox: the run waits for it, records what it found,
    starts nothing more and says so in its last line; --resume packages the theme without a second
    verify attempt."""
    from envforge.pipeline.generate.rundb import RunDB

    command, out = _corridor_command(tmp_path)
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "good: verify..." in line:
            break
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait() == 130, rest
    resume = shlex.join(["envforge", *command[3:], "--resume"])
    assert rest.rstrip().splitlines()[-1] == (
        f"envforge generate: interrupted; kept the finished work of good (verify); `{resume}` continues the run from "
        f"where it stopped")
    assert "Traceback" not in rest and not (out / "good").exists()  # nothing started after verify
    resumed = subprocess.run(command + ["--resume", "--json"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["accepted"] == ["good"]
    assert "good: verify..." not in resumed.stderr
    db = RunDB(out / "envforge.sqlite")
    assert [a["status"] for a in db.attempts("good") if a["stage"] == "verify"] == ["done"]
    db.close()
