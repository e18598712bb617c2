"""What a provider's reply is trusted with: the one rule for the usage it reports and the one
bound on its size. The model and the server in front of it are untrusted input (issue 22).

Usage. A reply's usage is trusted when every count is present and is an integer from 0 to
`MAX_TOKENS_PER_CALL`, the cached tokens are no more than the prompt tokens they are part of
(OpenAI counts them inside `prompt_tokens`), the prompt (cached tokens included) is no more
tokens than the request has UTF-8 bytes plus `PROMPT_OVERHEAD_TOKENS` and `MESSAGE_OVERHEAD_TOKENS`
a message (a byte-level tokenizer never makes more tokens than bytes; the overhead covers chat
templates and a provider's tool-use preamble), and the output is no more than the call's
`max_tokens`; and, when a provider reported it (not a recording a person may have written), the
prompt is at least the request's characters / `MOST_CHARS_PER_TOKEN` tokens. Anything else is
*untrusted*: "missing" (no usage, or no prompt or output count: local servers such as vLLM,
Ollama or llama.cpp often send none), "forged" (negative, NaN, a string, a float, more cached
than prompt tokens, more tokens than the call could hold) or "implausible" (fewer prompt tokens
than the request's size implies: a provider reporting 1 token a call would let any number of
calls through a budget). The ledger charges an untrusted call at least its reservation, and by
the sizes of its request and reply, and counts it (ledger.py).

Size. A reply may hold at most `MOST_CHARS_PER_TOKEN` characters per token of the call's
`max_tokens`, plus `REPLY_SLACK_CHARS` (text and tool calls together, the arguments as JSON).
Real tokens average about 4 characters; the margin covers long runs of spaces or punctuation
that a tokenizer packs into one token. A larger reply is a `MalformedResponse`: it is charged,
never stored nor sent back to the model. Its HTTP body is read only up to `reply_byte_cap`,
counted as sent and once decoded (sdk.py), and so is a cache entry or a recording.
"""
from __future__ import annotations

import json
import math
from typing import Any

from envforge.pipeline.llm.errors import MalformedResponse
from envforge.pipeline.llm.messages import Request, Response, Usage

MAX_TOKENS_PER_CALL = 10**9  # no call reads or writes a billion tokens; more is a forged count
PROMPT_OVERHEAD_TOKENS = 2048
MESSAGE_OVERHEAD_TOKENS = 16
MOST_CHARS_PER_TOKEN = 32  # no tokenizer packs more characters into one token, whichever way it is counted
REPLY_SLACK_CHARS = 1024
REPLY_ENVELOPE_BYTES = 64 * 1024
FORGED, MISSING, IMPLAUSIBLE = "forged", "missing", "implausible"
ABSENT = object()  # a field the reply does not have


def _count(name: str, value: Any) -> tuple[int, str]:
    """The token count in `value`, or 0 and what is wrong with it."""
    if type(value) is not int:  # bool, float (NaN included), str, None, objects: not a count
        shown = repr(value)[:40]
        return 0, f"{name} is {shown} ({type(value).__name__}), expected an integer number of tokens"
    if not 0 <= value <= MAX_TOKENS_PER_CALL:
        return 0, f"{name} is {value}, expected 0 to {MAX_TOKENS_PER_CALL:,} tokens"
    return value, ""


def checked_usage(provider: str, fields: dict[str, Any] | None, *, prompt: str, output: str,
                  cache_read: str = "", cache_write: str = "", cache_in_prompt: bool = False) -> tuple[Usage, str]:
    """The usage a reply reports, checked: (usage, "") when trusted, else (Usage(), why) where
    `why` starts with "missing" or "forged" and names the field and what was found.

    `fields` maps the wire's field names to the reply's values (`ABSENT` or None where the reply
    has none; `fields` None: the reply has no usage at all). `prompt` and `output` name the two
    counts every billed reply must carry; `cache_read` and `cache_write` name optional counts
    (absent is 0). `cache_in_prompt`: the prompt count includes the cache reads (OpenAI)."""
    if fields is None:
        return Usage(), f"{MISSING} usage: the {provider} reply reports no usage"
    absent = [name for name in (prompt, output) if fields.get(name, ABSENT) in (ABSENT, None)]
    if absent:
        return Usage(), f"{MISSING} usage: the {provider} reply reports no {' and no '.join(absent)}"
    counts: dict[str, int] = {}
    for name in (prompt, output, cache_read, cache_write):
        if not name:
            continue
        value = fields.get(name, ABSENT)
        if name in (cache_read, cache_write) and value in (ABSENT, None):
            value = 0
        counts[name], problem = _count(name, value)
        if problem:
            return Usage(), f"{FORGED} usage: {provider} reply: {problem}"
    read = counts.get(cache_read, 0)
    if cache_in_prompt and read > counts[prompt]:
        return Usage(), (f"{FORGED} usage: {provider} reply: {cache_read} {read} is more than "
                         f"{prompt} {counts[prompt]}, which includes them")
    return Usage(input_tokens=counts[prompt] - (read if cache_in_prompt else 0), output_tokens=counts[output],
                 cache_read_tokens=read, cache_write_tokens=counts.get(cache_write, 0)), ""


def usage_problem(usage: Usage, request: Request | None = None, reported: bool = True) -> str:
    """The same rule on usage already in our own form (a cache entry, a journal, a recording), and,
    given the `request`, the bounds of what that call could have used (see above); the lower bound
    only on usage a provider `reported` (a recording's usage is optional, 0 when left out)."""
    _, problem = checked_usage("stored", {k: getattr(usage, k) for k in vars(usage)}, prompt="input_tokens",
                               output="output_tokens", cache_read="cache_read_tokens",
                               cache_write="cache_write_tokens")
    if problem or request is None:
        return problem
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    most = prompt_token_bound(request)
    if prompt > most:
        return (f"{FORGED} usage: a prompt of {prompt:,} tokens (cache included) for a request of "
                f"{most - PROMPT_OVERHEAD_TOKENS - MESSAGE_OVERHEAD_TOKENS * len(request.messages):,} bytes "
                f"(at most {most:,} tokens)")
    if usage.output_tokens > request.max_tokens:
        return f"{FORGED} usage: {usage.output_tokens:,} output tokens, more than max_tokens {request.max_tokens:,}"
    chars = request_chars(request)
    if reported and prompt < chars // MOST_CHARS_PER_TOKEN:
        return (f"{IMPLAUSIBLE} usage: a prompt of {prompt:,} tokens (cache included) for a request of {chars:,} "
                f"characters (at least {chars // MOST_CHARS_PER_TOKEN:,} tokens at {MOST_CHARS_PER_TOKEN} characters "
                f"a token); charged by its size")
    return ""


def request_chars(request: Request) -> int:
    """The characters of `request`: messages, tool calls and tools (what its prompt is made of)."""
    chars = sum(len(m.content) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)
                for m in request.messages)
    return chars + sum(len(t.name) + len(t.description) + len(str(t.parameters)) for t in request.tools)


def prompt_token_bound(request: Request) -> int:
    """The most prompt tokens `request` can be: its UTF-8 bytes plus the overheads (see above)."""
    size = sum(len(m.content.encode("utf-8", "replace")) + len(m.tool_call_id)
               + sum(len(c.id) + len(c.name) + len(json.dumps(c.arguments, default=str).encode()) for c in m.tool_calls)
               for m in request.messages)
    size += sum(len(json.dumps([t.name, t.description, t.parameters], default=str).encode()) for t in request.tools)
    return size + PROMPT_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS * len(request.messages)


def untrusted_kind(problem: str) -> str:
    """"forged", "missing" or "implausible" for a problem of `usage_problem`, "" for none."""
    return problem.split(" ", 1)[0] if problem else ""


def reply_chars(response: Response) -> int:
    """The size of a reply as the model wrote it: text plus tool calls (arguments as JSON)."""
    return len(response.text) + sum(len(c.id) + len(c.name) + len(json.dumps(c.arguments, default=str))
                                    for c in response.tool_calls)


def reply_char_cap(max_tokens: int) -> int:
    return max_tokens * MOST_CHARS_PER_TOKEN + REPLY_SLACK_CHARS


def reply_byte_cap(max_tokens: int) -> int:
    """The most bytes of a reply's HTTP body read: the character cap as JSON-escaped UTF-8 at worst
    (`\\uXXXX\\uXXXX`, 12 bytes a character) plus `REPLY_ENVELOPE_BYTES` of envelope."""
    return reply_char_cap(max_tokens) * 12 + REPLY_ENVELOPE_BYTES


def check_reply_size(provider: str, response: Response, max_tokens: int) -> None:
    """Raise MalformedResponse when the reply is larger than `max_tokens` allows (see above)."""
    size, cap = reply_chars(response), reply_char_cap(max_tokens)
    if size > cap:
        raise MalformedResponse(
            f"{provider}: reply of {size:,} characters ({len(response.tool_calls)} tool call(s)) is more than "
            f"max_tokens {max_tokens:,} allows (at most {cap:,}: {MOST_CHARS_PER_TOKEN} per token plus "
            f"{REPLY_SLACK_CHARS}); not used")


def finite_dollars(value: float, what: str) -> float:
    """A dollar amount a cap is compared with: finite and >= 0, else ValueError (fail closed)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what}: expected a finite number of dollars >= 0, found {value!r}")
    return float(value)
