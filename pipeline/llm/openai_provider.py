"""`openai/<model>`: Chat Completions with function calling through the openai SDK. With a
base URL it talks to any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, OpenRouter)."""
from __future__ import annotations

import json
from typing import Any

import openai

from envforge.pipeline import safe_io
from envforge.pipeline.llm import sdk
from envforge.pipeline.llm.errors import MalformedResponse
from envforge.pipeline.llm.messages import Message, Request, Response, ToolCall
from envforge.pipeline.llm.trust import ABSENT, checked_usage, reply_byte_cap
from envforge.pipeline.located import LocatedError

FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider:
    name = "openai"

    def __init__(self, api_key: str | None, base_url: str | None, timeout: float):
        # OpenAI's own API wants max_completion_tokens (reasoning models reject max_tokens);
        # compatible servers are safest with the long-standing max_tokens.
        self._max_tokens_field = "max_tokens" if base_url else "max_completion_tokens"
        # max_retries=0: retry.py is the one retry policy of the project.
        self.clients = sdk.Clients(lambda: openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0,
            http_client=sdk.http_client(openai, timeout=timeout),
        ))

    async def complete(self, request: Request) -> Response:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_wire(request.messages),
            self._max_tokens_field: request.max_tokens,
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        kwargs.update(sdk.sampling_fields(request, "stop"))
        async with self.clients.lease() as client:
            body = await sdk.call(client, "/chat/completions", kwargs, openai, self.name,
                                  reply_byte_cap(request.max_tokens))
        return from_wire(body, request.model)

    async def close(self) -> None:
        await self.clients.close()


def to_wire(messages: tuple[Message, ...]) -> list[dict]:
    out: list[dict] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            out.append(turn)
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def from_wire(body: Any, model: str) -> Response:
    """Our Response from the reply's JSON body (as parsed by sdk.call; nothing in it is trusted)."""
    choices = sdk.field(body, "choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse(f"openai: response has no choices: {str(body)[:200]}")
    choice = choices[0]
    message = sdk.field(choice, "message")
    if not isinstance(message, dict):
        raise MalformedResponse("openai: choices[0] has no message object")
    calls: list[ToolCall] = []
    listed = sdk.field(message, "tool_calls")
    for n, call in enumerate(listed if isinstance(listed, list) else ()):
        function = sdk.field(call, "function")
        name = sdk.field(function, "name")
        where = f"arguments of tool call {str(name)[:60]!r}"
        text = sdk.text_field(function, "arguments", "openai", f"tool_calls[{n}].function") or "{}"
        try:  # a string of JSON in the JSON body: read by the same bounded reader, on its own
            arguments = safe_io.parse_json(text, where, most=sdk.ARGUMENTS_DEPTH, cut_deep=True)
        except LocatedError as exc:
            raise MalformedResponse(f"openai: {where} are not JSON: {exc}") from None
        calls.append(sdk.tool_call("openai", sdk.field(call, "id"), name, arguments))
    usage, problem = checked_usage("openai", usage_fields(sdk.field(body, "usage")), prompt="prompt_tokens",
                                   output="completion_tokens", cache_read="cached_tokens", cache_in_prompt=True)
    finish = sdk.text_field(choice, "finish_reason", "openai", "choices[0]") or ("tool_calls" if calls else "stop")
    return Response(
        text=sdk.text_field(message, "content", "openai", "choices[0].message"),
        tool_calls=tuple(calls),
        stop_reason=FINISH_REASONS.get(finish, finish),
        usage=usage,
        model=f"openai/{model}",
        usage_problem=problem,
    )


def usage_fields(usage: Any) -> dict[str, Any] | None:
    """The reply's usage counts as sent, None for no usage."""
    if usage in (ABSENT, None):
        return None
    details = sdk.field(usage, "prompt_tokens_details")
    return {
        "prompt_tokens": sdk.field(usage, "prompt_tokens"),
        "completion_tokens": sdk.field(usage, "completion_tokens"),
        "cached_tokens": ABSENT if details in (ABSENT, None) else sdk.field(details, "cached_tokens"),
    }
