"""An envforge environment as an Inspect AI task, found by name (`envforge/env`) through the
package's `inspect_ai` entry point, run offline with Inspect's mockllm model.

Each run is a separate Python process started in an empty folder, as a user runs Inspect: in the
repository root, the build's envforge.egg-info (on sys.path through the current folder) would
hide that envforge is an installed package, which Inspect checks before it names a task after it.
mockllm is given its replies with their token counts: it would otherwise estimate them with a
tokenizer it downloads, and these tests run offline.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

ROOT = Path(__file__).resolve().parent.parent
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
SOLUTION = ROOT / "examples" / "crate_dock_level_01.actions"

RUN = """
import itertools, json, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

moves, task_args, name = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]

def usage(output):
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return output

if moves:  # tool calls, one action each
    replies = (usage(ModelOutput.for_tool_call("mockllm", "move", {"direction": d})) for d in moves)
else:  # mockllm's own default: its fixed text and no tool call, forever
    replies = (usage(ModelOutput.from_content("mockllm", "Default output from mockllm/model")) for _ in itertools.count())
(log,) = inspect_eval(name, model=get_model("mockllm/model", custom_outputs=replies),
                      task_args=task_args, display="none")
print(json.dumps({"status": log.status, "error": str(log.error or ""), "location": log.location}))
"""


def _run(tmp_path: Path, moves: list[str], task: str = "envforge/env", **task_args):
    from inspect_ai.log import read_eval_log

    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", RUN, json.dumps(moves), json.dumps({"path": str(CRATE_DOCK), **task_args} if task == "envforge/env" else task_args), task],
                          cwd=work, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "success", result["error"]
    files = list((work / "logs").glob("*.eval"))
    assert [str(f) for f in files] == [result["location"]]  # Inspect's default log folder, where `inspect view` looks
    return read_eval_log(result["location"])


def test_every_level_is_a_sample_scored_in_0_1(tmp_path):
    log = _run(tmp_path, [])
    levels = sorted(p.name for p in (CRATE_DOCK / "levels").glob("*.yaml"))
    assert sorted(s.id for s in log.samples) == [f"crate_dock/{name}" for name in levels]
    for sample in log.samples:
        score = sample.scores["normalized_reward"]
        assert 0.0 <= score.value["normalized"] <= 1.0 and score.value["solved"] in (0.0, 1.0)
        # a reply with no tool call is no action: the episode stops at evaluate's format-error streak
        assert score.answer == "format_error_streak" and score.metadata["env_steps"] == 0
    metrics = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert metrics == {"normalized": 0.0, "solved": 0.0}


def test_tool_calls_are_the_actions_and_a_solved_level_scores_1(tmp_path):
    moves = [ln.split("=")[1] for ln in SOLUTION.read_text().splitlines() if ln.startswith("move")]
    log = _run(tmp_path, moves, max_levels=1)
    (sample,) = log.samples
    score = sample.scores["normalized_reward"]
    assert score.value == {"normalized": 1.0, "solved": 1.0} and score.answer == "solved"
    tools = [m for m in sample.messages if m.role == "tool"]
    assert len(tools) == len(moves) and "SOLVED" in tools[-1].text
    assert score.metadata["env_steps"] == len(moves) and score.metadata["tokens_in"] == 10 * len(moves)


def test_a_folder_of_environments_is_one_task(tmp_path):
    log = _run(tmp_path, [], "envforge/reference", max_levels=1, split="val")  # the bundled reference envs
    assert sorted(s.id for s in log.samples) == ["crate_dock/level_11.yaml", "tide_pool/level_11.yaml"]
    assert {s.metadata["level"] for s in log.samples} == {"val_levels/level_11.yaml"}
