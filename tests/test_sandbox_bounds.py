"""Wall-clock budgets and capped records (issue 15, groups 6 and 7)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_kit import envforge
from sandbox_kit import Host, assert_no_canary

from envforge.pipeline.evaluate.episode import KEEP_OBSERVATION_CHARS, kept
from envforge.pipeline.testing.tiny_env import write_env


@pytest.mark.slow  # measured: a whole command waits out its budget
@pytest.mark.parametrize("command, stopped", [
    ("check", r"found wall_clock: (stopped after \d+ steps: check's budget of 8s ran out|still running)"),
    # verify's budget is a safety stop: an error naming what it cut, never a rejection (issue 26)
    ("verify", r"^envforge verify: infrastructure failure: verify's wall-clock budget of 8s \(--budget\) ran out "
               r"during the execution stage, after \d+s: a safety stop, not a verdict on the environment \(where it "
               r"cuts depends on machine load\); nothing was judged or recorded"),
])
def test_an_env_sleeping_under_the_call_limit_stops_at_the_commands_budget(host: Host, tmp_path, command, stopped):
    env_dir = host.env("sleepy_step")
    done = envforge(command, "--budget", "8", env_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert re.search(stopped, done.stdout if command == "check" else done.stderr, re.M), done.stdout + done.stderr
    if command == "verify":
        assert "REJECTED" not in done.stdout and not (env_dir / "verification.json").exists(), done.stdout
    assert_no_canary(f"{command}'s output", done.stdout + done.stderr)
    clean = envforge(command, write_env(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stdout + clean.stderr


@pytest.mark.slow  # measured: a whole command waits out its budget
def test_evaluate_stops_a_sleepy_episode_at_its_wall_clock_and_the_run_at_its_own(host: Host, tmp_path):
    import json

    env_dir = host.env("sleepy_step")
    common = ["evaluate", str(env_dir), "--agent", "random", "--concurrency", "1", "--episode-seconds", "3"]
    done = envforge(*common, "--runs", "1", "--out", tmp_path / "episode")
    assert "Traceback" not in done.stdout + done.stderr
    (record,) = [json.loads(x) for x in (tmp_path / "episode" / "episodes.jsonl").read_text().splitlines()]
    assert (record["stop_reason"], record["normalized"]) == ("wall_clock", None), record
    assert record["stop_detail"].endswith("(limit 3s)") and record["steps"] < 100

    # Each episode takes at least 3s, so past a run's 1s no second one starts.
    done = envforge(*common, "--runs", "3", "--run-seconds", "1", "--out", tmp_path / "run")
    assert done.returncode == 3, done.stdout + done.stderr
    assert re.search(r"wall clock of 1s reached \(wall_clock\) \([23] episode\(s\) not started", done.stderr), (
        done.stderr
    )
    assert len((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()) <= 1
    assert "Traceback" not in done.stdout + done.stderr


def test_a_large_observation_is_kept_as_its_size_and_digest():
    small = "x" * 100
    assert kept(small) == small
    big = "y" * (KEEP_OBSERVATION_CHARS + 1)
    note = kept(big)
    assert re.fullmatch(rf"<observation of {len(big)} characters, cut: not kept; sha256 [0-9a-f]{{16}}>", note)
    assert kept(big) == note and kept(big[:-1] + "z") != note  # still tells two runs apart
    assert kept({"grid": big}).startswith("<observation of ")


@pytest.mark.slow  # measured: the worker burns CPU up to its limit
def test_the_pool_counts_cpu_across_leases_and_retires_a_worker_near_its_limit(host: Host):
    """The mechanism, not a CPU window (a busy machine moves a worker's start-up CPU, issue 23): a
    worker under CPU_REUSE_SHARE of its limit is reused, its CPU is counted over its life, and a
    healthy worker past the share is retired for that alone."""
    from envforge.pipeline.sandbox import SandboxLimits, WorkerPool
    from envforge.pipeline.sandbox.outside.pool import CPU_REUSE_SHARE

    burn = 0.5  # CPU seconds each step burns (the env spins on process_time)
    env_dir = host.env("burn_cpu", burn=burn)
    limits = SandboxLimits(call_seconds=60, cpu_seconds=5)
    share = CPU_REUSE_SHARE * limits.cpu_seconds
    go = {"action": "go", "params": {}}
    with WorkerPool(1, limits) as pool:
        with pool.lease(env_dir) as first:
            first.call("reset", level="levels/level_01.yaml")
            first.call("step", action=go)
            assert burn <= first.cpu_seconds_used < share  # the step's burn is counted; under the share
        with pool.lease(env_dir) as again:
            assert again is first  # under its share: worth reusing
            again.call("reset", level="levels/level_01.yaml")
            steps = 0
            while again.cpu_seconds_used < share and steps < 10:
                again.call("step", action=go)
                steps += 1
            # Counted over its life, not per lease: this lease alone burned less than the share.
            assert burn * steps < share <= again.cpu_seconds_used
            assert again.alive and not again.failed  # so nothing but its CPU retires it
        with pool.lease(env_dir) as fresh:
            assert fresh is not first and not first.alive
            assert fresh.cpu_seconds_used < share
        assert (pool.started, pool.reused) == (2, 1)


def test_an_episode_past_its_wall_clock_stops_with_the_reason_recorded():
    import time

    from envforge.pipeline.evaluate.episode import INFRASTRUCTURE, Decision, Limits, Tracker

    tracker = Tracker(Limits(episode_seconds=0.05), max_steps=100, max_reward=1.0)
    tracker.decided(Decision(error="format", message="not an action"))
    assert tracker.stop_reason is None
    time.sleep(0.06)
    tracker.decided(Decision(error="format", message="not an action"))
    assert tracker.stop_reason == "wall_clock" and "limit 0.05s" in tracker.stop_detail
    record = tracker.record(env="e", level="l", run=0, agent="a", model="m", split="test")
    assert record.stop_reason == "wall_clock" and "wall_clock" in INFRASTRUCTURE


def test_a_trajectory_line_caps_long_texts_and_says_so():
    from envforge.pipeline.evaluate.episode import (
        TRAJECTORY_TEXT_CHARS,
        Decision,
        Limits,
        Tracker,
        Turn,
        trajectory_line,
    )

    big = "o" * (8 * 1024 * 1024)
    tracker = Tracker(Limits(), max_steps=10, max_reward=1.0)
    line = trajectory_line(Turn(1, 10, big, big, []), Decision(error="format", reply=big, prompt=big), {}, tracker)
    for key in ("observation", "last_action_result", "reply", "prompt"):
        assert len(getattr(line, key)) < TRAJECTORY_TEXT_CHARS + 100
        cut = f"[cut: {len(big) - TRAJECTORY_TEXT_CHARS} of {len(big)} characters not logged]"
        assert getattr(line, key).endswith(cut)
    small = trajectory_line(Turn(1, 10, "obs", None, []), Decision(error="format", reply="r"), {}, tracker)
    assert (small.observation, small.reply) == ("obs", "r")


HUGE_PROMPT_AGENT = '''
class Agent:
    def __init__(self, env, llm):
        self.llm = llm

    def act(self, turn):
        self.llm("x" * 500_000)
        return {"action": {"action": "wait", "params": {}}}
'''
# Goes around llm() (which shapes requests properly) to the raw request channel.
MALFORMED_AGENT = '''
class Agent:
    def __init__(self, env, llm):
        self.ask = llm.__self__.ask

    def act(self, turn):
        self.ask("model", {"messages": [{"role": 5, "content": ["not", "text"]}], "max_tokens": "lots"})
        return {"action": {"action": "wait", "params": {}}}
'''


@pytest.mark.parametrize("source, reason", [
    (HUGE_PROMPT_AGENT, "expected at most 400000 characters in one request, found 500000"),
    (MALFORMED_AGENT, "messages[0]: expected {'role': one of ['assistant', 'system', 'user'], 'content': text}"),
])
def test_a_learned_agents_oversized_or_malformed_request_is_its_own_failure(tmp_path, llm_server, llm_env, capsys,
                                                                              source, reason):
    import json

    from envforge.pipeline.cli import main
    from envforge.pipeline.testing.llm_server import Reply

    learned = tmp_path / "learned"
    learned.mkdir()
    (learned / "agent.py").write_text(source)
    (learned / "learned.json").write_text(json.dumps({"env": "crate_dock"}))
    (learned / "prompt.txt").write_text("Push the crates onto the docks.")
    llm_server.rule = lambda n: Reply("east")
    env = Path(__file__).resolve().parent.parent / "generated_envs" / "reference" / "crate_dock"
    status = main(["evaluate", str(env), "--agent", f"learned:{learned}", "--model", "openai/gpt-4o-mini",
                   "--base-url", llm_server.openai_url, "--no-cache", "--max-levels", "1", "--runs", "1",
                   "--max-steps", "3", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (record,) = [json.loads(x) for x in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert record["stop_reason"] == "agent_error", record
    assert "agent.py made a bad model request: " + reason in record["stop_detail"]
    assert len(llm_server.requests) == 0  # nothing of it reached the model
    assert status in (0, 1)


def test_an_env_that_winds_back_its_own_step_count_is_still_truncated_at_config_max_steps(host: Host, tmp_path):
    import json

    env_dir = host.env("endless_episode")
    done = envforge("evaluate", env_dir, "--agent", "random", "--runs", "2", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(x) for x in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert [(r["steps"], r["stop_reason"], r["truncated"]) for r in records] == [(10, "max_steps", True)] * 2
    verified = envforge("verify", "--stages", "execution", env_dir)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # 2 random and 1 planner episode on its one level, each cut at termination.max_steps: 10.
    assert verified.stdout.startswith("execution: 3 episodes (30 steps) on 1 levels"), verified.stdout
