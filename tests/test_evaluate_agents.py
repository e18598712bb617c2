"""`envforge evaluate --agent react|tools` against the loopback model server: valid replies,
garbage, faults, budgets, and the feedback an agent gets when its action fails."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envforge.pipeline.cli import main
from envforge.pipeline.testing.llm_server import Fault, Reply

REFERENCE = Path(__file__).resolve().parent.parent / "generated_envs" / "reference"
PYTHON_DICT_IN_FENCE = ("<thinking_memory>The crate is south-east; I will walk east first.</thinking_memory>\n"
                        "<action>\n```python\n{'action': 'move', 'params': {'direction': 'east'}}\n```\n</action>\n"
                        "That should get me closer.")


@pytest.fixture
def evaluate(llm_server, llm_env, monkeypatch, capsys):
    """evaluate(*flags) -> (exit status, stdout, stderr, records) for one level of crate_dock, one run."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ENVFORGE_RETRY_MAX_ATTEMPTS", "3")
    out = llm_env / "out"

    def run(*flags: str, env: str = "crate_dock"):
        status = main(["evaluate", str(REFERENCE / env), "--max-levels", "1", "--runs", "1", "--out", str(out),
                       "--model", "openai/gpt-4o-mini", "--base-url", llm_server.openai_url, *flags])
        captured = capsys.readouterr()
        rows = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
        return status, captured.out, captured.err, rows

    return run


def bodies(server) -> list[dict]:
    return [r["body"] for r in server.requests]


def test_react_plays_valid_actions_given_as_python_dicts_in_fences_with_prose(evaluate, llm_server):
    llm_server.rule = lambda n: Reply(PYTHON_DICT_IN_FENCE, input_tokens=100, output_tokens=20)
    status, out, _, (record,) = evaluate("--agent", "react", "--max-steps", "6")
    assert status == 0
    assert record["stop_reason"] == "max_steps" and record["steps"] == 6 and record["model_calls"] == 6
    assert record["format_errors"] == 0 and record["action_validity_rate"] == 1.0
    assert record["tokens_in"] == 600 and record["tokens_out"] == 120 and record["dollars"] > 0
    assert "cost summary:" in out and "mean normalized 0.00%" in out
    system, user = bodies(llm_server)[0]["messages"]
    assert "==== Environment Instruction ====" in system["content"] and "<thinking_memory>" in system["content"]
    instruction = (REFERENCE / "crate_dock" / "agent_instruction.txt").read_text().strip()
    action_space = (REFERENCE / "crate_dock" / "action_space.txt").read_text().strip()
    assert instruction in system["content"] and action_space in system["content"]
    assert "==== Now, your observation is: ====" in user["content"] and "None yet." in user["content"]
    later = bodies(llm_server)[3]["messages"][1]["content"]
    assert '- step 1: {"action": "move", "params": {"direction": "east"}} -> moved east' in later


def test_react_garbage_replies_are_counted_format_errors_that_end_the_episode(evaluate, llm_server):
    llm_server.rule = lambda n: Reply("I would rather not say.")
    status, out, _, (record,) = evaluate("--agent", "react")
    assert status == 0
    assert record["stop_reason"] == "format_error_streak"
    assert record["format_errors"] == 5 and record["steps"] == 5 and record["env_steps"] == 0
    assert record["action_validity_rate"] == 0.0 and record["normalized"] == 0.0
    fifth = bodies(llm_server)[4]["messages"][1]["content"]
    assert (
        "no action: expected a dictionary with an \"action\" key in the reply, found 'I would rather not say.'" in fifth
    )
    assert "stop: format_error_streak 1" in out


def test_react_sees_why_its_action_failed_and_recovery_is_measured(evaluate, llm_server):
    replies = ['<action>{"action": "move", "params": {"direction": "up"}}</action>',
               '<action>{"action": "jump"}</action>']
    llm_server.rule = lambda n: Reply(replies[n - 1] if n <= 2 else PYTHON_DICT_IN_FENCE)
    _, _, _, (record,) = evaluate("--agent", "react", "--max-steps", "3")
    assert record["invalid_actions"] == 1 and record["format_errors"] == 1 and record["valid_actions"] == 1
    assert record["error_streaks"] == 1 and record["recovery_rate"] == 1.0 and record["invalid_action_rate"] == 0.5
    second, third = (bodies(llm_server)[i]["messages"][1]["content"] for i in (1, 2))
    assert "move needs params.direction in north/south/east/west, got 'up'" in second
    assert "unknown action 'jump'; expected one of move, wait" in third


def test_tools_agent_calls_typed_tools_and_plain_text_is_a_format_error(evaluate, llm_server):
    llm_server.rule = lambda n: (Reply("Let me think.") if n == 2 else
                                 Reply("", tool_calls=[("move", {"direction": "south"})]))
    status, _, _, (record,) = evaluate("--agent", "tools", "--max-steps", "4", env="tide_pool")
    assert status == 0
    assert record["format_errors"] == 1 and record["valid_actions"] == 3 and record["model_calls"] == 4
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in bodies(llm_server)[0]["tools"]}
    assert tools["move"]["properties"]["direction"]["enum"] == ["north", "south", "east", "west"]
    assert tools["move"]["required"] == ["direction"] and tools["wait"]["properties"] == {}
    third = bodies(llm_server)[2]["messages"][1]["content"]
    assert "no action: expected a call to one of the tools, found no tool call but 'Let me think.'" in third


def test_rate_limits_are_retried_and_the_episode_goes_on(evaluate, llm_server):
    llm_server.rule = lambda n: (Fault(status=429, headers={"retry-after": "0"}, message="slow down")
                                 if n % 2 == 1 else Reply(PYTHON_DICT_IN_FENCE))
    status, _, _, (record,) = evaluate("--agent", "react", "--max-steps", "3")
    assert status == 0
    assert record["stop_reason"] == "max_steps" and record["retries"] == 3 and record["model_calls"] == 3


def test_a_failing_model_ends_the_episode_with_model_error_and_a_rerun_retries_it(evaluate, llm_server):
    llm_server.rule = lambda n: Fault(status=500, message="the server is on fire")
    status, out, err, (record,) = evaluate("--agent", "react")
    assert status == 1
    assert record["stop_reason"] == "model_error" and "the server is on fire" in record["stop_detail"]
    assert "1 episode(s) ended on a failed model call" in err
    assert "over 0 episode(s)" in out  # left out of the scores

    llm_server.rule = lambda n: Reply(PYTHON_DICT_IN_FENCE)
    status, out, _, rows = evaluate("--agent", "react", "--max-steps", "2", "--resume")
    assert status == 0 and "0 already done, 1 run now" in out
    assert [r["stop_reason"] for r in rows] == ["model_error", "max_steps"]


def test_a_budget_cap_stops_the_run_with_exit_status_3(evaluate, llm_server):
    llm_server.rule = lambda n: Reply(PYTHON_DICT_IN_FENCE)
    status, _, err, (record,) = evaluate("--agent", "react", "--budget-usd", "0.0001")
    assert status == 3
    assert record["stop_reason"] == "budget" and record["model_calls"] == 0
    assert "budget exceeded: the run cap is $0.0001" in err
    assert llm_server.count() == 0


def test_json_goes_to_stdout_and_the_cost_summary_to_stderr(evaluate, llm_server):
    llm_server.rule = lambda n: Reply(PYTHON_DICT_IN_FENCE)
    _, out, err, _ = evaluate("--agent", "react", "--max-steps", "2", "--json")
    summary = json.loads(out)
    assert summary["model"] == "openai/gpt-4o-mini" and summary["envs"]["crate_dock"]["episodes"] == 1
    assert summary["overall"]["dollars"] > 0
    assert "cost summary:" in err


@pytest.mark.parametrize("scope, finished, not_started", [("theme", 2, 2), ("run", 1, 3)])
def test_a_budget_stop_ends_what_its_cap_s_scope_covers_whatever_its_message_says(tmp_path, scope, finished,
                                                                                  not_started):
    """Two environments, two runs, one at a time: an environment's own cap ("theme", the ledger's scope)
    stops that environment's later episodes; the run's cap stops every one. The message names the run
    in both: the scope the cap carried decides, not the words."""
    import asyncio

    from envforge.pipeline.envfolder.spec import EnvSpec
    from envforge.pipeline.evaluate.episode import Decision
    from envforge.pipeline.evaluate.records import Records
    from envforge.pipeline.evaluate.runner import RunOptions
    from envforge.pipeline.evaluate.runner import evaluate as run_episodes

    async def capped(ctx, tracker, log):
        tracker.decided(Decision(error="budget", message="run: budget exceeded: the run cap is $0.01",
                                 budget_scope=scope))
        return tracker

    targets = [EnvSpec.open(REFERENCE / "crate_dock"), EnvSpec.open(REFERENCE / "tide_pool")]
    outcome = asyncio.run(run_episodes(targets, capped, RunOptions("scripted", "-", runs=2, max_levels=1,
                                                                   concurrency=1), Records(tmp_path / "out")))
    assert (len(outcome.finished), outcome.not_started) == (finished, not_started)
    assert {r.stop_reason for r in outcome.finished} == {"budget"}
    assert outcome.budget_message == "run: budget exceeded: the run cap is $0.01"


def test_the_turn_prompt_is_compiled_once_and_its_file_not_looked_at_again_each_turn(monkeypatch):
    import os

    from envforge.pipeline import prompts
    from envforge.pipeline.evaluate.model_agents import agent_turn

    environment = prompts._environment()
    environment.cache.clear()
    loads, looked = [], []
    get_source, getmtime = environment.loader.get_source, os.path.getmtime
    monkeypatch.setattr(environment.loader, "get_source", lambda env, name: loads.append(name) or get_source(env, name))
    monkeypatch.setattr(os.path, "getmtime", lambda path: looked.append(path) or getmtime(path))

    def prompt(step: int) -> str:
        return agent_turn({"step": step, "max_steps": 3, "observation": f"you are at {step}",
                           "last_action_result": None, "history": []})["prompt"]

    assert "you are at 1" in prompt(1)
    assert "agents/react_step.j2" in loads and len(loads) == len(set(loads))  # read and compiled once each
    loads.clear(), looked.clear()
    assert "you are at 2" in prompt(2) and "you are at 3" in prompt(3)
    assert loads == [] and looked == []  # later turns neither read nor look at a template file
