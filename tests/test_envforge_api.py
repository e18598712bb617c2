"""The public Python API (`import envforge`): open, play step by step, evaluate, read records,
all callable from inside a running event loop (a notebook), with the env's code in the sandbox."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import envforge

ROOT = Path(__file__).resolve().parent.parent
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
SOLUTION = ROOT / "examples" / "crate_dock_level_01.actions"


def _solution() -> list[str]:
    return [ln for ln in SOLUTION.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_open_reads_the_folder_as_data():
    env = envforge.open(CRATE_DOCK)
    assert env.name == "crate_dock" and env.max_steps == 30
    assert [a.name for a in env.actions] == ["move", "wait"]
    assert len(env.levels("test")) == 10 and env.levels("test")[0] == "levels/level_01.yaml"
    assert env.max_reward("levels/level_01.yaml") == 1.0
    assert env.parse_action("move north") == {"action": "move", "params": {"direction": "north"}}


def test_open_refuses_a_folder_that_is_not_an_environment(tmp_path):
    with pytest.raises(envforge.UserError, match="expected an environment folder"):
        envforge.open(tmp_path)


def test_session_plays_the_known_solution_to_a_terminated_episode():
    with envforge.open(CRATE_DOCK).session() as s:
        first = s.reset("level_01")
        assert "Step 0/30" in first.observation and first.info["crate_count"] >= 1
        for line in _solution():
            step = s.step(line)
        assert step.total_reward == 1.0
        assert step.terminated and not step.truncated
        assert step.info["status"] == "SOLVED"
        with pytest.raises(RuntimeError, match="the episode has ended"):
            s.step("wait")


def test_session_truncates_at_max_steps():
    with envforge.open(CRATE_DOCK).session() as s:
        s.reset("level_01")
        steps = [s.step({"action": "wait", "params": {}}) for _ in range(30)]
    assert not any(st.done for st in steps[:-1])
    assert steps[-1].truncated and not steps[-1].terminated and steps[-1].steps == 30


def test_evaluate_inside_a_running_event_loop(tmp_path):
    async def notebook_cell():
        random = envforge.evaluate(CRATE_DOCK, agent="random", max_levels=2, runs=1, out=tmp_path / "random")
        planner = await envforge.evaluate_async(CRATE_DOCK, agent="planner", max_levels=2, runs=1,
                                                out=tmp_path / "planner")
        return random, planner

    random, planner = asyncio.run(notebook_cell())
    assert sorted(e.level for e in planner.episodes) == ["levels/level_01.yaml", "levels/level_02.yaml"]
    assert all(e.stop_reason == "solved" and e.normalized == 1.0 for e in planner.episodes)
    assert planner.overall["mean_normalized"] == 1.0
    assert len(random.episodes) == 2 and all(0.0 <= e.normalized <= 1.0 for e in random.episodes)
    # the records on disk read back as the same objects
    assert sorted(e.key for e in envforge.episodes(tmp_path / "planner")) == sorted(e.key for e in planner.episodes)
    assert (tmp_path / "planner" / "report.md").is_file()


EVALUATE_DEFAULTS = r"""
import json, os, sys
import envforge

result = envforge.evaluate(sys.argv[1], agent="random", max_levels=1)
print(repr(result))
try:
    envforge.evaluate(sys.argv[1], max_levels=1, out="second")  # no agent given: the command's, react
except envforge.UserError as e:
    print("refused:", str(e).splitlines()[0])
print(json.dumps({"runs": result.runs, "split": result.split, "out": str(result.out),
                  "episodes": len(result.episodes), "tmp": os.listdir(os.environ["TMPDIR"])}))
"""


def test_the_python_api_has_the_commands_defaults_and_leaves_no_temp_folder(tmp_path):
    """Issue 23: envforge.evaluate played 1 run where the command plays 3, its agent default was
    another, and each call left a temporary folder behind."""
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                                                            "ENVFORGE_MODEL")}
    env.update(TMPDIR=str(tmp_path / "tmp"), ENVFORGE_DOTENV=str(tmp_path / ".env"))
    done = subprocess.run([sys.executable, "-c", EVALUATE_DEFAULTS, str(CRATE_DOCK)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    seen = json.loads(lines[-1])
    assert (seen["runs"], seen["split"], seen["episodes"]) == (3, "test", 3)  # evaluate's --runs 3
    assert (tmp_path / seen["out"]).resolve() == tmp_path / "evaluation"  # evaluate's --out evaluation
    assert (tmp_path / "evaluation" / "episodes.jsonl").is_file()
    assert seen["tmp"] == []  # nothing left in the temp folder
    # print(result): one line, no episode shown twice
    assert lines[0].startswith("Evaluation(random on 1 environment(s), split test, 3 run(s): 3 episode(s), mean ")
    assert "EpisodeRecord(" not in done.stdout
    assert lines[1].startswith("refused:") and "model" in lines[1]  # react, as the command: it needs a model


def test_evaluate_rejects_bad_options_with_one_line(tmp_path):
    with pytest.raises(envforge.UserError, match="expected at least one ENV_DIR|expected an environment folder"):
        envforge.evaluate(tmp_path / "missing", agent="random", out=tmp_path / "o")


def test_a_python_call_run_again_is_told_in_keywords_what_to_pass(tmp_path):
    """Issue 37: the README's notebook example failed the second time with `--out evaluation: ...
    pass --resume`, flags a Python caller cannot pass. The error names the call's keywords, and
    resume=True, as it says, runs the cell again."""
    out = tmp_path / "nb"
    first = envforge.evaluate(CRATE_DOCK, agent="random", max_levels=1, runs=1, out=out)
    with pytest.raises(envforge.UserError) as refused:
        envforge.evaluate(CRATE_DOCK, agent="random", max_levels=1, runs=1, out=out)
    said = str(refused.value)
    assert said.startswith(f"out={out}: it already holds an evaluation") and "pass resume=True" in said, said
    assert "--" not in said
    again = envforge.evaluate(CRATE_DOCK, agent="random", max_levels=1, runs=1, out=out, resume=True)
    assert [e.total_reward for e in again.episodes] == [e.total_reward for e in first.episodes]
    with pytest.raises(envforge.UserError, match=r"^agent=nosuch: expected react, tools, random"):
        envforge.evaluate(CRATE_DOCK, agent="nosuch", out=tmp_path / "other")


def test_an_options_error_in_keywords_keeps_what_names_no_flag():
    from envforge.pipeline.api.evaluate import EvaluateOptions

    said = EvaluateOptions.in_keywords("--runs, --concurrency and --max-levels: expected positive numbers; "
                                       "--no-such-flag stays; see `envforge evaluate --help`")
    assert said == ("runs, concurrency and max_levels: expected positive numbers; --no-such-flag stays; "
                    "see `envforge evaluate --help`")


def test_the_core_api_needs_no_extra_and_make_says_which_to_install():
    code = ("import sys; sys.modules['gymnasium'] = None; sys.modules['inspect_ai'] = None\n"
            "import envforge\n"
            "print(envforge.open(sys.argv[1]).name)\n"
            "try:\n    envforge.make(sys.argv[1])\nexcept ModuleNotFoundError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code, str(CRATE_DOCK)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "crate_dock", "envforge.make: expected Gymnasium to be installed, found none: "
        f"pip install '{ROOT}[gym]'"]  # the checkout this envforge was installed from


def test_a_theme_that_ended_in_an_error_is_in_generation_errors(tmp_path):
    """No recording of the theme in the replay folder: an error of the setup, neither accepted nor
    rejected, and said so from Python."""
    (tmp_path / "themes.txt").write_text("A maze\n")
    (tmp_path / "recordings").mkdir()
    run = envforge.generate(tmp_path / "themes.txt", tmp_path / "out", provider="replay",
                            replay=tmp_path / "recordings")
    assert (run.accepted, run.rejected) == ([], {})
    assert list(run.errors) == ["a_maze_9c00aa"] and run.errors["a_maze_9c00aa"]["stage"] == "design"
    assert "no recording of the theme 'A maze'" in run.errors["a_maze_9c00aa"]["reason"]
