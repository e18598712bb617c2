"""`anthropic/<model>`: the Messages API through the anthropic SDK, with native tool use and
prompt caching of long stable prefixes."""
from __future__ import annotations

from typing import Any

import anthropic

from envforge.pipeline.llm import sdk
from envforge.pipeline.llm.errors import MalformedResponse
from envforge.pipeline.llm.messages import Message, Request, Response, ToolCall
from envforge.pipeline.llm.trust import ABSENT, checked_usage, reply_byte_cap

# Below about 1024 tokens Anthropic does not cache a prefix; 4 chars per token is our estimate.
AUTO_CACHE_MIN_CHARS = 4096
MAX_CACHE_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}
INPUT_AT = 3  # a tool_use block's input opens at level 4 of the body: {"content": [{"input": {...}}]}


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, api_key: str | None, base_url: str | None, timeout: float):
        # max_retries=0: retry.py is the one retry policy of the project.
        self.clients = sdk.Clients(lambda: anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0,
            http_client=sdk.http_client(anthropic, timeout=timeout),
        ))

    async def complete(self, request: Request) -> Response:
        system, messages = to_wire(request.messages)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        kwargs.update(sdk.sampling_fields(request, "stop_sequences"))
        async with self.clients.lease() as client:
            body = await sdk.call(client, "/v1/messages", kwargs, anthropic, self.name,
                                  reply_byte_cap(request.max_tokens), depth=INPUT_AT + sdk.ARGUMENTS_DEPTH)
        return from_wire(body, request.model)

    async def close(self) -> None:
        await self.clients.close()


def to_wire(messages: tuple[Message, ...]) -> tuple[list[dict], list[dict]]:
    """Split out the system blocks and merge turns so roles alternate as the API expects."""
    system = [{"type": "text", "text": m.content} for m in messages if m.role == "system"]
    system_marked = any(m.cache for m in messages if m.role == "system")
    turns: list[dict] = []
    marked: list[dict] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks: list[dict] = []
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if m.is_error:
                block["is_error"] = True
            blocks.append(block)
        elif m.content:
            blocks.append({"type": "text", "text": m.content})
        for call in m.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
        if not blocks:
            continue
        if m.cache:
            marked.append(blocks[-1])
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if system and (system_marked or sum(len(b["text"]) for b in system) >= AUTO_CACHE_MIN_CHARS):
        marked.insert(0, system[-1])
    for block in marked[-MAX_CACHE_BREAKPOINTS:]:
        block["cache_control"] = EPHEMERAL
    return system, turns


def from_wire(body: Any, model: str) -> Response:
    """Our Response from the reply's JSON body (as parsed by sdk.call; nothing in it is trusted)."""
    content = sdk.field(body, "content")
    if not isinstance(content, list):
        raise MalformedResponse(f"anthropic: response has no content list: {str(body)[:200]}")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(content):
        kind = sdk.field(block, "type")
        if kind == "text":
            texts.append(sdk.text_field(block, "text", "anthropic", f"content[{n}]"))
        elif kind == "tool_use":
            calls.append(sdk.tool_call("anthropic", sdk.field(block, "id"), sdk.field(block, "name"),
                                       sdk.field(block, "input")))
    u = sdk.field(body, "usage")
    names = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    usage, problem = checked_usage("anthropic", None if u in (ABSENT, None) else {n: sdk.field(u, n) for n in names},
                                   prompt="input_tokens", output="output_tokens",
                                   cache_read="cache_read_input_tokens", cache_write="cache_creation_input_tokens")
    return Response(
        text="".join(texts),
        tool_calls=tuple(calls),
        stop_reason=sdk.text_field(body, "stop_reason", "anthropic", "reply") or ("tool_use" if calls else "end_turn"),
        usage=usage,
        model=f"anthropic/{model}",
        usage_problem=problem,
    )
