"""Learned agent code in the sandbox: it reaches models only by asking the parent, which answers
with its own key; the key never enters the worker."""
from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from envforge.pipeline.cli import main
from envforge.pipeline.sandbox import SandboxFailure, Worker
from envforge.pipeline.testing.llm_server import Reply

CANARY = "sk-canary-7f3e9a"

# Looks for the key everywhere a process can: its environment, /proc, the parent's /proc, the
# home folder; sends what it found to the model and returns it as its thought.
SNOOPING_AGENT = '''
import os

class Agent:
    def __init__(self, env, llm):
        self.env, self.llm = env, llm

    def act(self, turn):
        found = [repr(dict(os.environ))]
        for path in ("/proc/self/environ", "/proc/1/environ", "/proc/%d/environ" % os.getppid(),
                     os.path.expanduser("~/.env"), "/work/main/.env"):
            try:
                with open(path, "rb") as f:
                    found.append(f.read().decode("utf-8", "replace"))
            except Exception as e:
                found.append(repr(e))
        reply = self.llm([{"role": "system", "content": "you answer with a direction"},
                          {"role": "user", "content": "\\n".join(found)}])
        return {"action": {"action": "move", "params": {"direction": reply.strip()}}, "thought": "\\n".join(found)}
'''


def agent_folder(tmp_path, source: str):
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.py").write_text(textwrap.dedent(source))
    return folder


def test_agent_code_gets_model_answers_from_the_parent_and_never_sees_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    asked = []

    def answer(kind, args):  # the parent's side: it holds the key and makes the call
        asked.append((kind, args))
        return {"text": "north"}

    with Worker(agent_folder(tmp_path, SNOOPING_AGENT), host="agent") as worker:
        worker.call("start", env={"name": "crate_dock"})
        out = worker.call("act", turn={"step": 1}, on_request=answer)
    assert out["action"] == {"action": "move", "params": {"direction": "north"}}
    assert [kind for kind, _ in asked] == ["model"]
    assert asked[0][1]["messages"][0] == {"role": "system", "content": "you answer with a direction"}
    assert CANARY not in json.dumps(asked) and CANARY not in json.dumps(out)
    assert "PYTHONHASHSEED" in out["thought"]  # it did read its environment: an allowlisted one


def test_the_call_time_limit_does_not_run_while_the_parent_answers(tmp_path):
    def slow_answer(kind, args):
        time.sleep(1.5)
        return {"text": "east"}

    with Worker(agent_folder(tmp_path, SNOOPING_AGENT), host="agent") as worker:
        worker.call("start", env={})
        out = worker.call("act", timeout=1.0, turn={"step": 1}, on_request=slow_answer)
        assert out["action"]["params"]["direction"] == "east"
        assert worker.alive and not worker.failed


def test_a_request_during_a_call_that_takes_none_is_a_protocol_failure(tmp_path):
    with Worker(agent_folder(tmp_path, SNOOPING_AGENT), host="agent") as worker:
        worker.call("start", env={})
        with pytest.raises(SandboxFailure) as failure:
            worker.call("act", turn={"step": 1})
    assert failure.value.kind == "protocol"
    assert "asked the parent for 'model' during 'act', which takes no requests" in failure.value.detail


def test_a_parent_callback_that_raises_kills_the_waiting_worker(tmp_path):
    def broken(kind, args):
        raise RuntimeError("the parent's answer failed")

    with Worker(agent_folder(tmp_path, SNOOPING_AGENT), host="agent") as worker:
        worker.call("start", env={})
        with pytest.raises(RuntimeError):
            worker.call("act", turn={"step": 1}, on_request=broken)
        assert worker.failed and not worker.alive


def test_agent_code_that_raises_is_a_typed_failure_with_its_line(tmp_path):
    source = ("class Agent:\n    def __init__(self, env, llm):\n        pass\n\n"
              "    def act(self, turn):\n        return 1 / 0\n")
    with Worker(agent_folder(tmp_path, source), host="agent") as worker:
        worker.call("start", env={})
        with pytest.raises(SandboxFailure) as failure:
            worker.call("act", turn={})
    assert failure.value.kind == "exception" and failure.value.where == "agent.py:6"
    assert "ZeroDivisionError" in failure.value.detail


def test_a_folder_without_an_agent_class_does_not_load(tmp_path):
    with pytest.raises(SandboxFailure) as failure:
        Worker(agent_folder(tmp_path, "x = 1\n"), host="agent")
    assert failure.value.kind == "load" and "expected a class with an act(turn) method" in failure.value.detail


def test_evaluating_learned_agent_code_sends_its_model_calls_through_the_parent_only(tmp_path, llm_server, llm_env,
                                                                                      monkeypatch, capsys):
    """End to end: `evaluate --agent learned:PATH` with agent.py; the loopback server sees the
    agent's messages (no key in them) and the key only in the parent's HTTP headers."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    learned = tmp_path / "learned"
    learned.mkdir()
    (learned / "agent.py").write_text(SNOOPING_AGENT)
    (learned / "prompt.txt").write_text("Push the crates onto the docks.")
    (learned / "learned.json").write_text(json.dumps({"env": "crate_dock"}))
    llm_server.rule = lambda n: Reply("east")
    env = Path(__file__).resolve().parent.parent / "generated_envs" / "reference" / "crate_dock"
    status = main(
        [
            "evaluate",
            str(env),
            "--agent",
            f"learned:{learned}",
            "--model",
            "openai/gpt-4o-mini",
            "--base-url",
            llm_server.openai_url,
            "--no-cache",
            "--max-levels",
            "1",
            "--runs",
            "1",
            "--max-steps",
            "3",
            "--out",
            str(tmp_path / "out"),
            "--json",
        ]
    )
    assert status == 0, capsys.readouterr().err
    (record,) = [json.loads(x) for x in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert record["steps"] == 3 and record["valid_actions"] == 3 and record["model_calls"] == 3
    assert len(llm_server.requests) == 3
    assert all(CANARY not in json.dumps(r["body"]) for r in llm_server.requests)
    assert all(CANARY in r["headers"].get("Authorization", r["headers"].get("authorization", ""))
               for r in llm_server.requests)
    trajectory = (tmp_path / "out" / record["trajectory"]).read_text()
    assert CANARY not in trajectory


def test_the_check_passes_the_seed_agent_and_refuses_code_that_fails_or_answers_nothing(tmp_path):
    from envforge.learning.agent_code_check import AGENT_LIMITS, check_code
    from envforge.learning.candidates import SEED_AGENT
    from envforge.pipeline.sandbox import WorkerPool

    env = {"name": "crate_dock", "instruction": "Push the crates.", "action_space": "move(direction)",
           "actions": ["move", "wait"], "max_steps": 30}
    turn = {"step": 1, "max_steps": 30, "observation": "#@$o#", "last_action_result": None, "history": []}
    reply = (
        '<thinking_memory>go</thinking_memory>\n<action>{"action": "move", "params": {"direction": "east"}}</action>'
    )
    cases = {
        "seed": (SEED_AGENT.read_text(), ""),
        "raises": (
            "class Agent:\n    def __init__(self, env, llm):\n        self.llm = llm\n\n"
            "    def act(self, turn):\n        return {}[0]\n",
            "agent.py at agent.py:6: exception: KeyError",
        ),
        "no action": (
            "class Agent:\n    def __init__(self, env, llm):\n        pass\n\n"
            '    def act(self, turn):\n        return {"thought": "hmm"}\n',
            "given a well-formed reply, returned no action",
        ),
        "forbidden": (
            "import socket\n\nclass Agent:\n    def act(self, turn):\n        return {}\n",
            "agent.py:1: expected no process, network",
        ),
    }
    with WorkerPool(2, AGENT_LIMITS, host="agent") as agents:
        for name, (source, expected) in cases.items():
            folder = tmp_path / name.replace(" ", "_")
            folder.mkdir()
            (folder / "agent.py").write_text(source)
            problem = check_code(folder, env, turn, reply, {"move", "wait"}, agents)
            assert (problem == "") if not expected else (expected in problem), (name, problem)
