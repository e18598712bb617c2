"""Tokens to dollars per stage, theme and run; budget caps stop a call before it is made."""
import asyncio
import logging

import pytest

from envforge.pipeline.llm import BudgetExceeded, Message, Request
from envforge.pipeline.llm.ledger import Ledger, estimate_tokens
from envforge.pipeline.llm.prices import PriceTable
from envforge.pipeline.testing.llm_server import Reply


def run_calls(client, calls, max_tokens=100):
    """calls: [(theme, stage, prompt)]; returns the responses, or the exception that ended them."""
    async def go():
        out = []
        async with client:
            for theme, stage, prompt in calls:
                try:
                    out.append(
                        await client.complete([Message.user(prompt)], theme=theme, stage=stage, max_tokens=max_tokens)
                    )
                except BudgetExceeded as exc:
                    out.append(exc)
        return out
    return asyncio.run(go())


def test_costs_come_from_the_price_table_and_add_up_per_stage_theme_and_run(llm_server, make_llm_client):
    llm_server.rule = lambda n: Reply(input_tokens=1000, output_tokens=500)  # gpt-4o: $0.0025 + $0.0050
    client = make_llm_client(no_cache=True)
    run_calls(client, [("maze", "design", "a"), ("maze", "dsl", "b"), ("ferry", "design", "c")], max_tokens=1000)
    ledger = client.ledger
    assert ledger.run.untrusted == 0
    assert ledger.run.cost_usd == pytest.approx(3 * 0.0075)
    assert ledger.by_stage["design"].cost_usd == pytest.approx(2 * 0.0075)
    assert ledger.by_theme["maze"].calls == 2 and ledger.by_theme["ferry"].usage.output_tokens == 500
    summary = ledger.summary()
    assert "stage design" in summary and "theme maze" in summary and "0.022500" in summary


def test_unknown_model_costs_nothing_and_warns_once(llm_server, make_llm_client, caplog):
    client = make_llm_client(model="openai/my-local-llama", no_cache=True)
    with caplog.at_level(logging.WARNING, logger="envforge.llm"):
        run_calls(client, [("", "design", "a"), ("", "design", "b")])
    assert client.ledger.run.cost_usd == 0 and client.ledger.run.calls == 2
    assert [r.message for r in caplog.records].count(
        "no price for model openai/my-local-llama in the price table: its calls are counted as $0 "
        "(add it with --prices FILE)") == 1
    assert "warning: no price for openai/my-local-llama" in client.ledger.summary()


def test_a_user_price_file_overrides_and_extends_the_shipped_table(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "models:\n  openai/gpt-4o: {input: 1, output: 2}\n  openai/my-llama*: {input: 0.5, output: 0.5}\n"
    )
    table = PriceTable.load(prices)
    assert table.lookup("openai/gpt-4o").input == 1
    assert table.lookup("openai/my-llama-70b").output == 0.5
    assert table.lookup("anthropic/claude-sonnet-4-5-20250929").output == 15  # shipped, by undated name


def test_run_budget_refuses_the_call_that_could_exceed_it(llm_server, make_llm_client):
    # gpt-4o. Estimate of each call: 1 input token (1 char / 4, rounded up) at $2.50/M + 100 output
    # tokens (max_tokens) at $10/M = $0.0010025. Actual cost: 10 in, 60 out = $0.000625.
    # Cap $0.002: call 1 (0 + 0.0010025) and call 2 (0.000625 + 0.0010025) fit; call 3
    # (0.00125 + 0.0010025 = 0.0022525) does not, and neither does anything after it.
    llm_server.rule = lambda n: Reply(input_tokens=10, output_tokens=60)
    client = make_llm_client(no_cache=True, run_budget_usd=0.002)
    results = run_calls(client, [("maze", "design", "a"), ("maze", "dsl", "b"), ("ferry", "code", "c"),
                                 ("ferry", "code", "d")])
    assert [type(r).__name__ for r in results] == ["Response", "Response", "BudgetExceeded", "BudgetExceeded"]
    assert results[2].scope == "run"
    assert str(results[2]).startswith("budget exceeded: the run cap is $0.0020")
    assert "it was not made" in str(results[2])
    assert llm_server.count() == 2
    assert client.ledger.run.cost_usd == pytest.approx(0.00125)


def test_theme_budget_stops_that_theme_only(llm_server, make_llm_client):
    llm_server.rule = lambda n: Reply(input_tokens=10, output_tokens=60)  # see the test above
    client = make_llm_client(no_cache=True, theme_budget_usd=0.0015)
    results = run_calls(client, [("maze", "design", "a"), ("maze", "dsl", "b"), ("ferry", "design", "c")])
    assert [type(r).__name__ for r in results] == ["Response", "BudgetExceeded", "Response"]
    assert results[1].scope == "theme" and "theme 'maze' has a cap of $0.0015" in str(results[1])
    assert client.ledger.by_theme["ferry"].calls == 1 and llm_server.count() == 2


def test_concurrent_calls_cannot_overrun_the_cap_together(llm_server, make_llm_client):
    llm_server.rule = lambda n: Reply(delay=0.1)
    client = make_llm_client(no_cache=True, run_budget_usd=0.0025)  # room for two estimates, not three

    async def go():
        async with client:
            return await asyncio.gather(*(client.complete([Message.user(str(i))], max_tokens=100) for i in range(4)),
                                        return_exceptions=True)

    results = asyncio.run(go())
    assert sum(isinstance(r, BudgetExceeded) for r in results) == 2
    assert llm_server.count() == 2


def test_the_estimate_is_characters_over_four_plus_max_tokens():
    request = Request("gpt-4o", (Message.user("x" * 4000),), max_tokens=1000)
    assert estimate_tokens(request) == 1000
    ledger = Ledger(PriceTable.load())
    assert ledger.estimate("openai/gpt-4o", request) == pytest.approx((1000 * 2.5 + 1000 * 10) / 1e6)
    # Anthropic: the dearer cache-write rate is the worst case for input.
    assert ledger.estimate("anthropic/claude-sonnet-4-5", request) == pytest.approx((1000 * 3.75 + 1000 * 15) / 1e6)


def test_untrusted_usage_from_any_source_never_lowers_the_spent_total():
    """A cache entry, journal or recording holding impossible usage is untrusted like a reply."""
    from envforge.pipeline.llm.messages import CallContext, Response, Usage

    ledger = Ledger(PriceTable.load(), run_cap_usd=1.0)
    ctx = CallContext("maze", "design")
    request = Request("openai/gpt-4o", (Message.user("x" * 400),), max_tokens=1000)
    held = ledger.reserve(ctx, ledger.estimate("openai/gpt-4o", request))
    spent = [ledger.settle(ctx, "openai/gpt-4o", Response("ok", usage=Usage(input_tokens=-10**8)), "provider", 0,
                           held, request)]
    spent.append(ledger.settle(ctx, "openai/gpt-4o", Response("ok", usage=Usage(output_tokens=10**6)), "cache", 0,
                               0.0, request))
    assert spent[0] == pytest.approx(held) and spent[1] == 0.0
    assert ledger.run.forged_usage == 2 and ledger.run.cost_usd == pytest.approx(held)
    assert ledger.run.usage.input_tokens == 2 * 100 and ledger.run.usage.output_tokens == 2  # the size estimate
    assert "untrusted: 2 call(s) with untrusted usage (2 forged, 0 missing, 0 implausible)" in ledger.summary()


@pytest.mark.parametrize("cap", [float("nan"), float("inf"), -1.0])
def test_a_cap_that_is_not_a_finite_amount_is_refused(cap, llm_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    from envforge.pipeline.errors import UserError
    from envforge.pipeline.llm import resolve

    with pytest.raises(UserError, match="finite, non-negative amount of dollars"):
        resolve(model="openai/gpt-4o", run_budget_usd=cap)
    with pytest.raises(ValueError, match="finite number of dollars"):
        Ledger(PriceTable.load(), theme_cap_usd=cap)
