"""Both wire formats through the real SDKs: text, tool calls, tool results, usage, caching marks."""
import asyncio

import pytest

from envforge.pipeline.llm import Message, ToolSpec
from envforge.pipeline.testing.llm_server import Reply

WRITE_FILE = ToolSpec("write_file", "Write a file in the environment folder.", {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
})


async def _tool_round_trip(client):
    async with client:
        conversation = [Message.system("You write environments."), Message.user("Write env_main.py")]
        first = await client.complete(conversation, theme="maze", stage="code", tools=[WRITE_FILE])
        conversation += [first.to_message(), Message.tool_result(first.tool_calls[0], "written 12 bytes")]
        second = await client.complete(conversation, theme="maze", stage="code", tools=[WRITE_FILE])
    return first, second


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tool_call_and_its_result_cross_the_wire(provider, llm_server, make_llm_client):
    llm_server.script = [
        Reply("Writing it.", tool_calls=[("write_file", {"path": "env_main.py", "content": "x = 1\n"})],
              input_tokens=10),
        Reply("Done."),
    ]
    first, second = asyncio.run(_tool_round_trip(make_llm_client(provider, no_cache=True)))

    assert first.stop_reason == "tool_use"
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("write_file", {"path": "env_main.py", "content": "x = 1\n"})
    ]
    assert first.text == "Writing it."
    assert second.text == "Done." and second.stop_reason == "end_turn" and not second.tool_calls
    assert first.usage.input_tokens == 10 and first.usage.output_tokens == 5

    body = llm_server.requests[1]["body"]
    call_id = first.tool_calls[0].id
    if provider == "openai":
        assert body["tools"][0]["function"]["name"] == "write_file"
        assert body["messages"][0] == {"role": "system", "content": "You write environments."}
        assert body["messages"][2]["tool_calls"][0]["id"] == call_id
        assert body["messages"][3] == {"role": "tool", "tool_call_id": call_id, "content": "written 12 bytes"}
    else:
        assert body["tools"][0]["input_schema"]["required"] == ["path", "content"]
        assert body["system"][0]["text"] == "You write environments."
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["messages"][1]["content"][1]["type"] == "tool_use"
        assert body["messages"][2]["content"][0] == {
            "type": "tool_result", "tool_use_id": call_id, "content": "written 12 bytes"}


def test_anthropic_marks_a_long_stable_prefix_for_prompt_caching(llm_server, make_llm_client):
    llm_server.script = [Reply(cached_tokens=1500, input_tokens=10), Reply()]
    abstraction = "The environment abstraction. " * 200  # ~6000 characters

    async def go():
        async with make_llm_client("anthropic", no_cache=True) as client:
            long = await client.complete([Message.system(abstraction), Message.user("design")], stage="design")
            await client.complete([Message.system("short"), Message.user("design")], stage="design")
            return long

    response = asyncio.run(go())
    long_body, short_body = (r["body"] for r in llm_server.requests)
    assert long_body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in short_body["system"][-1]
    assert response.usage.cache_read_tokens == 1500 and response.usage.input_tokens == 10


def test_anthropic_caches_where_the_caller_marks_the_end_of_examples(llm_server, make_llm_client):
    async def go():
        async with make_llm_client("anthropic", no_cache=True) as client:
            await client.complete([Message.user("examples ...", cache=True), Message.user("now the theme")])

    asyncio.run(go())
    blocks = llm_server.requests[0]["body"]["messages"][0]["content"]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in blocks[1]


def test_openai_cached_prompt_tokens_are_counted_apart(llm_server, make_llm_client):
    llm_server.script = [Reply(input_tokens=200, cached_tokens=800, output_tokens=50)]

    async def go():
        async with make_llm_client("openai", no_cache=True) as client:
            return await client.complete([Message.user("hi")])

    usage = asyncio.run(go()).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (200, 800, 50)


@pytest.mark.parametrize("provider,wire_reason", [("openai", "length"), ("anthropic", "max_tokens")])
def test_truncated_answers_say_max_tokens(provider, wire_reason, llm_server, make_llm_client):
    llm_server.script = [Reply("half an ans", stop_reason=wire_reason)]

    async def go():
        async with make_llm_client(provider, no_cache=True) as client:
            return await client.complete([Message.user("hi")], max_tokens=3)

    assert asyncio.run(go()).stop_reason == "max_tokens"
    sent = llm_server.requests[0]["body"]
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_calls_one_after_another_reuse_one_connection(provider, llm_server, make_llm_client):
    async def go():
        async with make_llm_client(provider, no_cache=True) as client:
            for n in range(6):
                await client.complete([Message.user(f"turn {n}")], theme="maze", stage="evaluate")
            return len(client.provider.clients.clients)

    assert asyncio.run(go()) == 1
    assert len({r["connection"] for r in llm_server.requests}) == 1  # one TCP connection, kept alive


def test_concurrent_calls_spread_over_small_connection_pools_kept_for_the_next_calls(llm_server, make_llm_client):
    # httpcore's pool costs O(connections²) a request: 16 calls in flight go to two SDK clients of 8.
    from envforge.pipeline.llm import sdk

    llm_server.rule = lambda n: Reply(f"answer {n}", delay=0.2)
    in_flight = 2 * sdk.CLIENT_REQUESTS

    async def go():
        async with make_llm_client("openai", no_cache=True, max_concurrency=in_flight) as client:
            for wave in range(2):
                await asyncio.gather(*(client.complete([Message.user(f"{wave}.{i}")], sample=i)
                                       for i in range(in_flight)))
            return len(client.provider.clients.clients)

    assert asyncio.run(go()) == 2
    first, second = llm_server.requests[:in_flight], llm_server.requests[in_flight:]
    # The second wave went over the first's connections (httpx closes one idle for 5 s, which a loaded
    # machine may see between two requests of one wave, so not necessarily every one of them).
    assert {r["connection"] for r in second} & {r["connection"] for r in first}


def test_closing_the_clients_while_a_call_is_in_flight_lets_that_call_end_cleanly():
    """An interrupted evaluate closes its provider while a model call is still in flight: the call's
    end then found no entry for its client (IndexError, a traceback after Ctrl-C)."""
    from envforge.pipeline.llm import sdk

    closed = []

    class Client:
        async def close(self):
            closed.append(self)

    clients = sdk.Clients(Client)

    async def go():
        async with clients.lease() as client:
            await clients.close()
            return client

    client = asyncio.run(go())
    assert closed == [client] and clients.clients == []
