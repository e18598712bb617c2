"""An envforge environment as an Inspect AI task, found by name (`envforge/env`) through the
package's `inspect_ai` entry point, run offline with Inspect's mockllm model: once through Inspect's
own command line, exactly as README.md shows it, and through `inspect_ai.eval` from Python.

The runs are processes apart from this one with the network out of reach (their HTTP proxy is a
closed loopback port) and a fresh temp folder, so tiktoken's cache starts empty: mockllm counts
tokens with tiktoken's o200k_base, which envforge provides from the `inspect` extra
(envforge/_tokenizer.py) instead of tiktoken's download. The command line runs in a process of its
own; the Python runs share one (importing inspect_ai costs seconds of CPU a process), each in an
empty folder of its own, as a user runs Inspect: in the repository root, the build's
envforge.egg-info (on sys.path through the current folder) would hide that envforge is an
installed package, which Inspect checks before it names a task after it. They give mockllm its
replies (tool calls) with fixed token counts.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import require_extra

require_extra("inspect_ai", "inspect")

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
README_COMMAND = "inspect eval envforge/env -T path=generated_envs/reference/crate_dock --model mockllm/model"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # as tiktoken checks it
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
SOLUTION = ROOT / "examples" / "crate_dock_level_01.actions"

# The Python runs, made together in one process (importing inspect_ai costs seconds of CPU a
# process): each in an empty folder of its own, `moves` its model: the stock mockllm (no tool call,
# forever) when empty, else one `move` tool call a reply; "go": a `go` tool call a reply, forever.
RUNS = """
import itertools, json, os, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

def usage(output):
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return output

for run in json.loads(sys.argv[1]):
    os.chdir(run["work"])
    if run["moves"] == "go":
        model = get_model("mockllm/model", custom_outputs=(
            ModelOutput.for_tool_call("mockllm", "go", {}) for _ in itertools.count()))
    elif run["moves"]:  # tool calls, one action each
        model = get_model("mockllm/model", custom_outputs=(
            usage(ModelOutput.for_tool_call("mockllm", "move", {"direction": d})) for d in run["moves"]))
    else:  # the stock mockllm: its fixed text and no tool call, forever
        model = "mockllm/model"
    (log,) = inspect_eval(run["task"], model=model, task_args=run["task_args"], display="none")
    print(json.dumps({"status": log.status, "error": str(log.error or ""), "location": log.location}), flush=True)
"""
SOLUTION_MOVES = [ln.split("=")[1] for ln in SOLUTION.read_text().splitlines() if ln.startswith("move")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """name -> the Inspect log of each Python run (RUNS), all made in one process with no network."""
    tmp = tmp_path_factory.mktemp("inspect")
    envs = tmp / "envs"  # an env whose rewards overflow beside crate_dock
    shutil.copytree(ROOT / "tests" / "hostile" / "overflow_reward", envs / "overflow_reward")
    shutil.copytree(CRATE_DOCK, envs / "crate_dock")
    plan = {
        "every_level": ([], "envforge/env", {"path": str(CRATE_DOCK)}),
        "tool_calls": (SOLUTION_MOVES, "envforge/env", {"path": str(CRATE_DOCK), "max_levels": 1}),
        "folder": ([], "envforge/reference", {"max_levels": 1, "split": "val"}),  # the bundled reference envs
        "overflow": ("go", "envforge/env", {"path": str(envs), "max_levels": 1}),
    }
    jobs = []
    for name, (moves, task, task_args) in plan.items():
        (tmp / name).mkdir()
        jobs.append({"work": str(tmp / name), "moves": moves, "task": task, "task_args": task_args})
    done = subprocess.run([sys.executable, "-c", RUNS, json.dumps(jobs)], cwd=tmp, env=_offline_env(tmp),
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.strip().splitlines()[-len(plan):]]
    return {name: _log(tmp / name, result) for name, result in zip(plan, results)}


def _log(work: Path, result: dict):
    from inspect_ai.log import read_eval_log

    assert result["status"] == "success", result["error"]
    files = list((work / "logs").glob("*.eval"))
    assert [str(f) for f in files] == [result["location"]]  # Inspect's default log folder, where `inspect view` looks
    return read_eval_log(result["location"])


def _offline_env(tmp_path: Path) -> dict:
    """A user's environment with no network, a fresh temp folder and no tiktoken settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "NO_PROXY",
                                                            "no_proxy", "INSPECT_LOG_DIR")}
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, every connection is refused
    env.update(HTTP_PROXY=dead, HTTPS_PROXY=dead, ALL_PROXY=dead, http_proxy=dead, https_proxy=dead, all_proxy=dead)
    (tmp_path / "tmp").mkdir()
    env["TMPDIR"] = str(tmp_path / "tmp")
    return env


def _tiktoken_cache(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "tmp" / "data-gym-cache").glob("*"))


def test_the_readme_command_runs_offline_one_sample_per_level(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert [ln.strip() for ln in readme.splitlines() if "--model mockllm/model" in ln] == [README_COMMAND]
    env = _offline_env(tmp_path)
    env["INSPECT_LOG_DIR"] = str(tmp_path / "logs")  # the folder `inspect view` shows, as README.md says
    inspect = Path(sys.executable).parent / "inspect"  # the command line this venv installed
    done = subprocess.run([str(inspect), *shlex.split(README_COMMAND)[1:]], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    (path,) = (tmp_path / "logs").glob("*.eval")  # one log, where Inspect was told to put it
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    assert log.status == "success" and log.eval.model == "mockllm/model"
    levels = sorted(p.name for p in (CRATE_DOCK / "levels").glob("*.yaml"))
    assert sorted(s.id for s in log.samples) == [f"crate_dock/{name}" for name in levels]
    for sample in log.samples:
        score = sample.scores["normalized_reward"]
        assert 0.0 <= score.value["normalized"] <= 1.0 and score.value["solved"] in (0.0, 1.0)
        assert score.answer == "format_error_streak"  # the stock mockllm calls no tool
    metrics = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert metrics == {"normalized": 0.0, "solved": 0.0}
    # mockllm counted its tokens with o200k_base, which came from the extra (no network to download it)
    (cached,) = _tiktoken_cache(tmp_path)
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == O200K_SHA256
    assert log.stats.model_usage["mockllm/model"].input_tokens > 0


def test_every_level_is_a_sample_scored_in_0_1(runs):
    log = runs["every_level"]
    levels = sorted(p.name for p in (CRATE_DOCK / "levels").glob("*.yaml"))
    assert sorted(s.id for s in log.samples) == [f"crate_dock/{name}" for name in levels]
    for sample in log.samples:
        score = sample.scores["normalized_reward"]
        assert 0.0 <= score.value["normalized"] <= 1.0 and score.value["solved"] in (0.0, 1.0)
        # a reply with no tool call is no action: the episode stops at evaluate's format-error streak
        assert score.answer == "format_error_streak" and score.metadata["env_steps"] == 0
    metrics = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert metrics == {"normalized": 0.0, "solved": 0.0}
    # a spread beside each mean (issue 23)
    assert {s.name: sorted(s.metrics) for s in log.results.scores} == {"normalized": ["mean", "std", "stderr"],
                                                                       "solved": ["mean", "stderr"]}


def test_tool_calls_are_the_actions_and_a_solved_level_scores_1(runs):
    moves = SOLUTION_MOVES
    log = runs["tool_calls"]
    (sample,) = log.samples
    score = sample.scores["normalized_reward"]
    assert score.value == {"normalized": 1.0, "solved": 1.0} and score.answer == "solved"
    tools = [m for m in sample.messages if m.role == "tool"]
    assert len(tools) == len(moves) and "SOLVED" in tools[-1].text
    # observations are preformatted text in `inspect view` (issue 23: as Markdown the crate_dock map's
    # rows merged and its `$` crates opened LaTeX): a fenced block holding the map as drawn
    first = [m for m in sample.messages if m.role == "user"][-1].text  # after the instruction: the first observation
    assert "```text\n" in first and first.rstrip().endswith("```")
    board = first[first.index("```text\n") + 8:first.rindex("```")]
    assert "$" in board and len([ln for ln in board.splitlines() if ln.startswith("#")]) >= 3
    assert all(t.text.count("```") == 2 for t in tools)
    assert score.metadata["env_steps"] == len(moves) and score.metadata["tokens_in"] == 10 * len(moves)


def test_a_folder_of_environments_is_one_task(runs):
    log = runs["folder"]
    assert sorted(s.id for s in log.samples) == ["crate_dock/level_11.yaml", "tide_pool/level_11.yaml"]
    assert {s.metadata["level"] for s in log.samples} == {"val_levels/level_11.yaml"}


def test_the_tokenizer_goes_where_tiktoken_caches_it_checked_and_once(tmp_path, monkeypatch):
    from envforge import _tokenizer

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    target = _tokenizer.provide()
    assert target is not None and target.parent == tmp_path / "cache"
    assert hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256
    target.write_bytes(b"a truncated download")  # a bad entry (tiktoken would drop it and download) is replaced
    assert _tokenizer.provide() == target and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256
    stamp = target.stat().st_mtime_ns
    assert _tokenizer.provide() == target and target.stat().st_mtime_ns == stamp  # a good one is left alone
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's "no cache": nothing to fill
    assert _tokenizer.provide() is None


def test_a_full_disk_under_the_tokenizer_cache_leaves_the_download_to_tiktoken(tmp_path, monkeypatch):
    import errno

    from envforge import _tokenizer

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "write", full)  # records.write_bytes turns ENOSPC into DiskFull, a UserError
    assert _tokenizer.provide() is None  # the task is still made; tiktoken downloads as usual
    assert list((tmp_path / "cache").iterdir()) == []  # no partial file left behind


def test_an_episode_whose_rewards_overflow_is_unscored_as_evaluate_leaves_it_out(runs):
    """Issue 22 item 5: Inspect averaged -inf. The overflowing env's sample is unscored (Inspect's
    NaN sentinel, left out of the means and counted), the other env's sample is scored."""
    import math

    log = runs["overflow"]
    scores = {s.id: s.scores["normalized_reward"] for s in log.samples}
    overflow = scores["overflow_reward/level_01.yaml"]
    assert math.isnan(overflow.value) and overflow.answer == "invalid_reward"
    assert "the total reward is not a finite number after environment step 2" in overflow.explanation
    assert scores["crate_dock/level_01.yaml"].value["normalized"] == 0.0  # "go" is no action of crate_dock
    metrics = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert metrics == {"normalized": 0.0, "solved": 0.0}
    assert all(s.unscored_samples == 1 for s in log.results.scores)
