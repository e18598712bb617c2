"""The data that crosses the LLM layer: messages in, a response out.

These are provider-neutral; `anthropic_provider` and `openai_provider` translate them to and
from each wire format, and `replay` reads and writes them as YAML.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A tool the model asked to run: `arguments` is the decoded JSON object. `problem`: why the
    arguments could not be read ("" when they were; `arguments` is then {}): the tool does not run
    and the model is told this as the call's result (a tool error, never an error of envforge)."""

    id: str
    name: str
    arguments: dict[str, Any]
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.problem:
            data["problem"] = self.problem
        return data


@dataclass(frozen=True)
class Message:
    """One turn of a conversation.

    - `system`: instructions (any number; they are joined in order).
    - `user`: text from the caller.
    - `assistant`: an earlier model reply; `tool_calls` holds the calls it made.
    - `tool`: the result of one tool call; `tool_call_id` names the call, `content` is the result.

    `cache=True` marks the end of a long, stable prefix (an abstraction, examples) so that
    providers with prompt caching can reuse it across calls.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    is_error: bool = False
    cache: bool = False

    @staticmethod
    def system(content: str, cache: bool = False) -> "Message":
        return Message("system", content, cache=cache)

    @staticmethod
    def user(content: str, cache: bool = False) -> "Message":
        return Message("user", content, cache=cache)

    @staticmethod
    def assistant(content: str = "", tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()) -> "Message":
        return Message("assistant", content, tool_calls=tuple(tool_calls))

    @staticmethod
    def tool_result(call: ToolCall | str, content: str, is_error: bool = False) -> "Message":
        call_id = call.id if isinstance(call, ToolCall) else call
        return Message("tool", content, tool_call_id=call_id, is_error=is_error)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call; `parameters` is a JSON Schema object."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. `input_tokens` excludes the cached ones, which are counted apart:
    `cache_read_tokens` were served from the provider's prompt cache, `cache_write_tokens`
    were written to it (Anthropic bills both at their own rates)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


# Stop reasons are normalised to Anthropic's names; an unknown provider value is kept as is.
StopReason = str  # "end_turn" | "tool_use" | "max_tokens" | "stop_sequence" | "refusal" | other


@dataclass(frozen=True)
class Response:
    """What a call returns. `source` says where it came from: "provider", "cache" or "replay".
    `retries` lists why earlier attempts failed (e.g. "429 rate limited"), oldest first.
    `usage_problem`: "" when the reply's usage is trusted, else why not ("forged usage: ..." or
    "missing usage: ...", trust.py); `usage` is then all zeros and the ledger charges the call
    at least its reservation."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = "end_turn"
    usage: Usage = Usage()
    model: str = ""
    source: str = "provider"
    retries: tuple[str, ...] = ()
    cost_usd: float = 0.0
    usage_problem: str = ""

    def to_message(self) -> Message:
        """The assistant turn to append to the conversation before sending tool results."""
        return Message.assistant(self.text, self.tool_calls)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "stop_reason": self.stop_reason,
            "usage": asdict(self.usage),
            "model": self.model,
            **({"usage_problem": self.usage_problem} if self.usage_problem else {}),
        }

    @staticmethod
    def from_dict(data: dict[str, Any], source: str) -> "Response":
        return Response(
            text=data.get("text") or "",
            tool_calls=tuple(ToolCall(**c) for c in data.get("tool_calls") or ()),
            stop_reason=data.get("stop_reason") or "end_turn",
            usage=Usage(**(data.get("usage") or {})),
            model=data.get("model") or "",
            source=source,
            usage_problem=str(data.get("usage_problem") or ""),
        )


@dataclass(frozen=True)
class CallContext:
    """Who is calling: the theme ("" outside any theme) and the pipeline stage
    ("design", "dsl", "code", "repair", "verify", "evaluate", "learn", "doctor", ...).
    Costs are aggregated by these, and replay finds recordings by them. `subject` is the
    whole theme text when there is one: replay matches a recording on it, never on a prefix."""

    theme: str = ""
    stage: str = ""
    subject: str = field(default="", compare=False)


@dataclass(frozen=True)
class Request:
    """Everything a provider needs for one call."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    stop: tuple[str, ...] = ()

    def key_material(self) -> dict[str, Any]:
        """The request as plain data, for content addressing and recordings."""
        return {
            "model": self.model,
            "messages": [{**asdict(m), "tool_calls": [c.to_dict() for c in m.tool_calls]} for m in self.messages],
            "tools": [asdict(t) for t in self.tools],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stop": list(self.stop),
        }
