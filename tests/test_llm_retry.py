"""Retries through the real SDKs against injected faults; counted at the server."""
import asyncio
import time

import pytest

from envforge.pipeline.llm import MalformedResponse, Message, ProviderError, RetriesExhausted
from envforge.pipeline.testing.llm_server import Fault, Reply, rate_limited


def ask(client, **kw):
    async def go():
        async with client:
            return await client.complete([Message.user("hello")], stage="design", **kw)
    return asyncio.run(go())


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_recovers_from_rate_limit_server_errors_overload_and_dropped_connections(provider, llm_server, make_llm_client):
    llm_server.script = [rate_limited("0"), Fault(status=500), Fault(status=529), Fault(kind="drop"), Reply("fine")]
    response = ask(make_llm_client(provider, no_cache=True))
    assert response.text == "fine"
    assert response.retries == ("429 rate limited", "500 server error", "529 overloaded", "connection error")
    assert llm_server.count() == 5


def test_waits_as_long_as_retry_after_says(llm_server, make_llm_client):
    llm_server.script = [Fault(status=429, headers={"retry-after-ms": "400"}), Reply()]
    started = time.monotonic()
    ask(make_llm_client(no_cache=True))
    assert time.monotonic() - started >= 0.4  # the backoff alone would wait ~0.01 s
    assert llm_server.count() == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_authentication_error_fails_at_once_with_the_providers_message(provider, llm_server, make_llm_client):
    llm_server.rule = lambda n: Fault(status=401, message="invalid x-api-key")
    with pytest.raises(ProviderError, match="401.*invalid x-api-key") as error:
        ask(make_llm_client(provider, no_cache=True))
    assert error.value.status == 401
    assert llm_server.count() == 1


def test_other_client_errors_are_not_retried(llm_server, make_llm_client):
    llm_server.rule = lambda n: Fault(status=400, message="max_tokens: must be positive")
    with pytest.raises(ProviderError, match="max_tokens: must be positive"):
        ask(make_llm_client(no_cache=True))
    assert llm_server.count() == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_responses_are_retried_a_bounded_number_of_times(provider, llm_server, make_llm_client):
    llm_server.rule = lambda n: Fault(kind="invalid_json")
    with pytest.raises(MalformedResponse, match="gave up after 3 attempts"):
        ask(make_llm_client(provider, no_cache=True))
    assert llm_server.count() == 3


def test_unparseable_tool_arguments_count_as_malformed(llm_server, make_llm_client):
    llm_server.script = [Reply(tool_calls=[("write_file", "not an object")]), Reply("recovered")]  # type: ignore[list-item]
    assert ask(make_llm_client(no_cache=True)).retries == ("malformed response",)


def test_gives_up_after_the_configured_number_of_attempts(llm_server, make_llm_client, monkeypatch):
    monkeypatch.setenv("ENVFORGE_RETRY_MAX_ATTEMPTS", "4")
    llm_server.rule = lambda n: Fault(status=503, message="upstream down")
    with pytest.raises(RetriesExhausted, match="upstream down.*gave up after 4 attempts") as error:
        ask(make_llm_client(no_cache=True))
    assert error.value.reasons == ["503 server error"] * 4
    assert llm_server.count() == 4


def test_a_slow_answer_times_out_and_is_retried(llm_server, make_llm_client):
    # The first reply comes far past the timeout, which leaves a busy machine room to make the retry's
    # connection and answer (at 0.3 s the retry, too, timed out at load 10).
    llm_server.script = [Reply("too late", delay=30.0), Reply("in time")]
    response = ask(make_llm_client(no_cache=True, timeout=3.0))
    # The mechanism: the first attempt hit the client-side timeout and the retry answered.
    assert response.text == "in time" and response.retries == ("timeout",)
    assert llm_server.count() == 2


def test_concurrency_is_limited_per_provider(llm_server, make_llm_client):
    llm_server.rule = lambda n: Reply(f"answer {n}", delay=0.15)
    client = make_llm_client(no_cache=True, max_concurrency=2)

    async def go():
        async with client:
            return await asyncio.gather(*(
                client.complete([Message.user(f"question {i}")], stage="evaluate") for i in range(6)))

    answers = asyncio.run(go())
    assert len({a.text for a in answers}) == 6
    assert llm_server.max_in_flight == 2
