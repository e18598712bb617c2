"""`envforge generate` against a misbehaving provider (issue 22): forged and missing usage and
runaway replies on the real OpenAI and Anthropic wire, through the loopback server. Each test
asserts what a user sees: the calls made under the cap, the bytes sent and stored, each theme's
verdict and stage, and the exit code."""
from __future__ import annotations

import json
import math
import re
import urllib.request

import pytest

from envforge.pipeline.llm.trust import reply_byte_cap
from envforge.pipeline.testing.llm_server import USAGE_FORGERIES, Reply, forged_usage, runaway_text


def _post(server, path: str, body: dict) -> dict:
    request = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_the_fixture_sends_forged_usage_as_it_is_and_counts_bytes(llm_server, path):
    llm_server.script = [Reply("a", usage=forged_usage(kind)) for kind in USAGE_FORGERIES]
    answers = [_post(llm_server, path, {"model": "m", "messages": []}) for _ in USAGE_FORGERIES]
    by_kind = dict(zip(USAGE_FORGERIES, answers))
    openai = path.endswith("completions")
    usage = {kind: answer.get("usage") for kind, answer in by_kind.items()}
    assert usage["missing"] is None and "usage" not in by_kind["missing"]
    assert usage["negative"]["prompt_tokens" if openai else "input_tokens"] == -100_000_000
    assert math.isnan(usage["nan"]["completion_tokens" if openai else "output_tokens"])
    assert usage["string"]["completion_tokens" if openai else "output_tokens"] == "lots"
    assert (usage["over_cached"]["prompt_tokens_details"]["cached_tokens"] if openai
            else usage["over_cached"]["cache_read_input_tokens"]) == 10_000_000
    assert set(usage["partial"]) == {"completion_tokens" if openai else "output_tokens"}
    assert llm_server.count() == len(USAGE_FORGERIES)
    assert llm_server.bytes_received == len(USAGE_FORGERIES) * len(b'{"model": "m", "messages": []}')

    llm_server.script = [Reply(runaway_text(20))]
    big = _post(llm_server, path, {"model": "m", "messages": []})
    text = big["choices"][0]["message"]["content"] if openai else big["content"][0]["text"]
    assert len(text) == 20_000_000 and llm_server.bytes_sent > 20_000_000


# --- cost accounting fails closed (issue 22, item 1) ----------------------------------------------
from misbehaving import generate_against  # noqa: E402

from envforge.pipeline.testing.llm_server import Fault  # noqa: E402

DESIGN = "## Goal\n" + "Walk the corridor to its far end, one room at a time. " * 8
# The cheapest call of a generate run reserves the design stage's max_tokens (4000) of output.
CHEAPEST = {"openai": 4000 * 0.60 / 1e6, "anthropic": 4000 * 5.00 / 1e6}
CAP = {"openai": "0.02", "anthropic": "0.10"}
KINDS = ["negative", "nan", "string", "over_cached", "missing", "implausible"]


@pytest.mark.slow  # measured: a whole generate on the real SDK's wire, a test
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("kind", KINDS)
def test_untrusted_usage_is_charged_its_reservation_and_the_run_stops_at_the_cap(llm_server, tmp_path, wire, kind):
    llm_server.rule = lambda n: Reply(DESIGN, usage=forged_usage(kind))
    run = generate_against(llm_server, wire, tmp_path, "--budget-usd", CAP[wire])
    summary, cap, calls = run.summary, float(CAP[wire]), llm_server.count()

    assert run.returncode == 3, run.stderr[-2000:]  # run budget reached
    assert 0 < calls <= cap / CHEAPEST[wire]  # each call counted at least its reservation
    assert calls * CHEAPEST[wire] <= summary["cost_usd"] <= cap
    assert summary["model_calls"]["made"] == calls and summary["model_calls"]["untrusted_usage"] == calls
    assert summary["skipped"], "themes after the cap are not started"
    stopped = [r for r in summary["rejected"].values() if r["reason"].startswith("budget exceeded")]
    assert len(stopped) == 1 and stopped[0]["stage"] in ("design", "dsl")
    expected = kind if kind in ("missing", "implausible") else "forged"
    counts = {k: calls if k == expected else 0 for k in ("forged", "missing", "implausible")}
    assert (f"untrusted: {calls} call(s) with untrusted usage ({counts['forged']} forged, {counts['missing']} "
            f"missing, {counts['implausible']} implausible)") in run.stderr
    assert f"{expected} usage" in run.stderr
    assert summary["model_calls"]["implausible_usage"] == counts["implausible"]
    total = next(line.split() for line in run.stderr.splitlines() if line.strip().startswith("total "))
    assert "$-" not in run.stderr and all(field.replace("/", "").replace(".", "").isdigit() for field in total[1:])
    if kind == "implausible":  # counted at the size estimate (characters / 4), not the 1 token reported
        assert int(total[4]) >= calls * 500, total  # the design prompt: about 4,000 characters


@pytest.mark.slow  # measured: a whole generate on the real SDK's wire, a test
def test_partial_usage_from_a_local_server_is_estimated_never_free(llm_server, tmp_path):
    """vLLM, Ollama or llama.cpp may send a completion count and no prompt count."""
    llm_server.rule = lambda n: Reply(DESIGN, usage=forged_usage("partial"))
    run = generate_against(llm_server, "openai", tmp_path, "--budget-usd", "5", themes="A maze with keys\n")
    calls = llm_server.count()
    assert run.returncode == 1 and calls == 5, run.stderr[-2000:]  # design + 4 DSL attempts, all charged
    assert run.summary["cost_usd"] >= calls * CHEAPEST["openai"]
    assert run.summary["model_calls"]["untrusted_usage"] == calls
    assert "missing usage: the openai reply reports no prompt_tokens" in run.stderr
    assert f"; {calls} call(s) with untrusted usage" not in run.stdout  # --json: the summary is JSON


@pytest.mark.slow  # measured: a whole generate on the real SDK's wire, a test
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_billed_replies_that_cannot_be_read_are_charged(llm_server, tmp_path, wire):
    llm_server.rule = lambda n: Fault(kind="invalid_json")
    run = generate_against(llm_server, wire, tmp_path, "--budget-usd", "5", themes="A maze with keys\n")
    attempts = llm_server.count()
    assert run.returncode == 1, run.stderr[-2000:]
    (verdict,) = run.summary["rejected"].values()
    assert verdict["stage"] == "design" and "model call failed" in verdict["reason"]
    assert run.summary["model_calls"]["unusable_replies"] == attempts == 3  # the malformed-reply retries
    assert run.summary["cost_usd"] >= attempts * CHEAPEST[wire]
    assert f"{attempts} billed attempt(s) whose reply could not be used" in run.stderr


# --- bounded replies (issue 22, item 2) ------------------------------------------------------------
@pytest.mark.slow  # measured: a whole generate on the real SDK's wire, a test
@pytest.mark.parametrize("wire, chunked", [("openai", False), ("anthropic", False), ("openai", True)])
def test_a_runaway_reply_of_tens_of_mb_is_malformed_charged_and_neither_read_stored_nor_sent_back(
        llm_server, tmp_path, wire, chunked):
    big = runaway_text(30)
    llm_server.rule = lambda n: Reply(big, usage=None, chunked=chunked)
    run = generate_against(llm_server, wire, tmp_path, "--budget-usd", "5", themes="A maze with keys\n")
    attempts = llm_server.count()
    assert run.returncode == 1, run.stderr[-2000:]
    (verdict,) = run.summary["rejected"].values()
    cap = reply_byte_cap(4000)  # the design stage's max_tokens
    assert verdict["stage"] == "design"
    if chunked:  # read up to the bound, then the connection is closed
        assert f"reply body longer than {cap:,} bytes; reading stopped there" in verdict["reason"]
    else:  # the declared length is refused before the body is read
        assert re.search(rf"reply body of 30,000,\d\d\d bytes \(content-length\), more than {cap:,}; not read",
                         verdict["reason"]), verdict["reason"]
    assert llm_server.answers_cut == attempts  # envforge stopped reading each of them
    assert llm_server.bytes_sent < attempts * len(big) / 2
    assert attempts == 3  # the malformed-reply retries, then no more
    assert llm_server.largest_request < 100_000  # the reply was never sent back to the model
    assert run.stored_bytes() < 1_000_000, run.largest_stored()  # nor kept: not in design.md nor the journal
    assert run.summary["model_calls"]["unusable_replies"] == attempts
    assert run.summary["cost_usd"] >= attempts * CHEAPEST[wire]


@pytest.mark.slow  # measured: a whole generate on the real SDK's wire, a test
def test_a_reply_within_its_max_tokens_allowance_is_used(llm_server, tmp_path):
    """The bound has a margin: a design of 4,000 tokens at up to 32 characters a token passes."""
    llm_server.rule = lambda n: Reply(DESIGN + " " * (4000 * 32 - len(DESIGN)) if n == 1 else "not yaml: [")
    run = generate_against(llm_server, "openai", tmp_path, themes="A maze with keys\n")
    (verdict,) = run.summary["rejected"].values()
    assert verdict["stage"] == "dsl", verdict  # the design was accepted; the DSL replies were nonsense
    assert run.summary["model_calls"]["unusable_replies"] == 0


# --- the ReAct reply parser: linear, and bounded by the same reply cap ----------------------------
def test_the_react_parser_is_bounded_by_the_reply_cap_of_its_default_max_tokens():
    from envforge.pipeline.evaluate.model_agents import ModelOptions
    from envforge.pipeline.evaluate.react import MAX_REPLY_CHARS, FormatError, parse_action, thought_of
    from envforge.pipeline.llm.trust import reply_char_cap

    assert MAX_REPLY_CHARS == reply_char_cap(ModelOptions().max_tokens)
    with pytest.raises(FormatError, match=f"at most {MAX_REPLY_CHARS} characters, found {MAX_REPLY_CHARS + 1}"):
        parse_action("<action>" * (MAX_REPLY_CHARS // 8) + "x" * (MAX_REPLY_CHARS % 8 + 1))
    # At the cap, a reply of nothing but opening tags is read in one pass: no action, said so.
    with pytest.raises(FormatError, match="expected a dictionary"):
        parse_action("<action>" * (MAX_REPLY_CHARS // 8))
    assert thought_of("<thinking_memory>" * 1000 + "x") == "<thinking_memory>" * 1000 + "x"


@pytest.mark.parametrize("reply, action", [
    ('<action><action>{"action": "a"}</action>', "a"),  # an opening tag inside a block is part of it
    ('<action>{"action": "a"}</action> then <action>{"action": "b"}', "a"),  # the last closed block wins
    ('\u0130' * 10 + '<ACTION>{"action": "c"}', "c"),  # where lower() lengthens the text before the tag
    ('{"action": "d"} prose {"action": "e"}', "e"),
])
def test_the_react_parser_reads_blocks_as_before(reply, action):
    from envforge.pipeline.evaluate.react import parse_action
    assert parse_action(reply)["action"] == action


def test_a_cached_reply_over_the_cap_is_not_served(llm_server, make_llm_client):
    """A cache written before the reply cap may hold a runaway reply: the call is made again."""
    import asyncio

    from envforge.pipeline.llm import Message, Response
    from envforge.pipeline.llm.cache import cache_key
    from envforge.pipeline.llm.messages import Request

    client = make_llm_client()
    messages = (Message.user("design a maze"),)
    request = Request(client.config.model, messages, (), 100, None, ())
    key = cache_key(client._cache_identity, request.key_material(), 0)

    async def go():
        async with client:
            await client.cache.put(key, client._cache_identity, Response(runaway_text(1)))
            return await client.complete(messages, max_tokens=100)

    assert asyncio.run(go()).text == "ok" and llm_server.count() == 1


# --- issue 34: decoded bytes bounded, implausible usage, arguments nested too deep ----------------
import asyncio  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from envforge.pipeline.testing.llm_server import Bomb, RawJSON  # noqa: E402

WIRE_MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}
# One call through the loopback server in a process of its own, after a first call has loaded
# everything: what it raised, and its peak resident memory before and after (KB).
ONE_CALL = r"""
import asyncio, json, resource, sys
from envforge.pipeline.llm import LLMClient, Message, resolve
from envforge.pipeline.llm.errors import LLMError

async def main(model, url):
    async with LLMClient(resolve(model=model, base_url=url, no_cache=True)) as client:
        await client.complete([Message.user("warm up")], max_tokens=4000)
        before, error = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, ""
        try:
            await client.complete([Message.user("design a maze")], max_tokens=4000)
        except LLMError as exc:
            error = str(exc)
        print(json.dumps({"error": error, "before_kb": before,
                          "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_gzip_bomb_is_refused_at_the_cap_once_decoded_holding_no_more_than_the_cap(
        llm_server, llm_env, monkeypatch, wire):
    """A gigabyte of text in a megabyte of gzip: the reply bound counts decoded bytes, and the
    process never holds more than the bound of them (it held the whole gigabyte and more before)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    llm_server.script = [Reply("warm"), Bomb(1_000_000_000), Bomb(1_000_000_000), Bomb(1_000_000_000)]
    url = llm_server.openai_url if wire == "openai" else llm_server.url
    done = subprocess.run([sys.executable, "-c", ONE_CALL, WIRE_MODELS[wire], url], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    cap = reply_byte_cap(4000)
    assert f"{wire}: reply body longer than {cap:,} bytes once decoded from gzip; reading stopped there" \
        in result["error"], result
    assert llm_server.count() == 4  # the warm-up, then the malformed-reply retries, no more
    grown_mb = (result["peak_kb"] - result["before_kb"]) / 1024
    assert grown_mb < 64, f"the peak resident memory grew by {grown_mb:.0f} MB reading three 1 GB bombs"
    assert llm_server.requests[1]["headers"].get("accept-encoding") == "gzip, deflate"


@pytest.mark.slow  # measured: a whole generate on the real SDK's wire, a test
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_gzip_bomb_for_the_design_rejects_the_theme_naming_the_cause(llm_server, tmp_path, wire):
    llm_server.rule = lambda n: Bomb(1_000_000_000)
    run = generate_against(llm_server, wire, tmp_path, "--budget-usd", "5", themes="A maze with keys\n")
    assert run.returncode == 1, run.stderr[-2000:]
    (verdict,) = run.summary["rejected"].values()
    assert verdict["stage"] == "design"
    assert f"reply body longer than {reply_byte_cap(4000):,} bytes once decoded from gzip" in verdict["reason"]
    assert run.summary["model_calls"]["unusable_replies"] == llm_server.count() == 3
    assert run.summary["cost_usd"] >= 3 * CHEAPEST[wire]  # billed: each charged its reservation
    assert run.stored_bytes() < 1_000_000, run.largest_stored()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_provider_reporting_one_token_a_call_is_charged_by_size_and_stopped_at_the_cap(
        llm_server, make_llm_client, wire):
    """32 calls of 200,000 characters each reported as 1 token went through a $0.10 cap for $0.0001."""
    from envforge.pipeline.llm import BudgetExceeded, Message
    from envforge.pipeline.llm.messages import Usage

    llm_server.rule = lambda n: Reply("noted", usage=forged_usage("implausible"))
    client = make_llm_client(wire, model=WIRE_MODELS[wire], no_cache=True, run_budget_usd=0.10)
    prompt = ("The agent reads a long account of the rooms it has walked through. " * 3000)[:200_000]

    async def go() -> str:
        async with client:
            for _ in range(32):
                try:
                    await client.complete([Message.user(prompt)], stage="design", max_tokens=1000)
                except BudgetExceeded as exc:
                    return str(exc)
        return ""

    stopped = asyncio.run(go())
    run, made = client.ledger.run, llm_server.count()
    assert stopped.startswith("budget exceeded: the run cap is $0.1000"), stopped
    assert 0 < made < 32 and run.calls == made
    assert run.implausible_usage == made and run.untrusted == made
    assert run.usage.input_tokens == made * 50_000  # counted at the size estimate, characters / 4
    assert made * client.ledger.cost(client.spec, Usage(50_000, 0)) <= run.cost_usd <= 0.10
    summary = client.ledger.summary()
    assert f"untrusted: {made} call(s) with untrusted usage (0 forged, 0 missing, {made} implausible)" in summary
    assert "implausible usage: a prompt of 1 tokens (cache included) for a request of 200,000 characters" in summary


DEEP = '{"path": "notes.md", "content": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_tool_arguments_nested_too_deep_make_a_call_the_model_is_told_of_and_the_rest_is_read(
        llm_server, make_llm_client, wire):
    from envforge.pipeline.llm import Message

    flat = {"path": "a.md", "content": [[["as deep as allowed"] * 2]]}
    edge = RawJSON('{"content": ' + "[" * 99 + "]" * 99 + "}")  # 100 levels: the most allowed
    llm_server.script = [Reply("Writing.", [("write_file", RawJSON(DEEP)), ("write_file", flat), ("finish", edge)])]

    async def go():
        async with make_llm_client(wire, no_cache=True) as client:
            return await client.complete([Message.user("write the files")], stage="code")

    reply = asyncio.run(go())
    deep, kept, at_edge = reply.tool_calls
    assert deep.name == "write_file" and deep.arguments == {}
    assert deep.problem.startswith("the arguments are nested more than 100 levels deep; they were not read")
    assert kept.arguments == flat and not kept.problem
    assert not at_edge.problem and json.dumps(at_edge.arguments).count("[") == 99
    assert reply.text == "Writing."


def test_an_action_nested_deeper_than_the_one_bound_is_a_format_error_not_read():
    """The ReAct reply's dictionary goes through the one bounded reader: 150 levels (which JSON's
    and Python's parsers would read) is refused as any unreadable action is."""
    from envforge.pipeline.evaluate.react import FormatError, parse_action

    shallow = '<action>{"action": "push", "params": {"box": ' + "[" * 98 + "1" + "]" * 98 + "}}</action>"  # 100 levels
    assert parse_action(shallow)["action"] == "push"
    deep = '<action>{"action": "push", "params": {"box": ' + "[" * 150 + "1" + "]" * 150 + "}}</action>"
    with pytest.raises(FormatError, match='expected a dictionary with an "action" key inside <action></action>'):
        parse_action(deep)
