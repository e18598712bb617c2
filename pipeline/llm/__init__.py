"""The LLM layer: one async client over Anthropic, OpenAI(-compatible) and replay, with
retries, a cost ledger and budgets, an on-disk response cache, and record/replay.

    from pipeline.llm import LLMClient, Message, ToolSpec
    response = await client.complete([Message.user("hi")], theme="maze", stage="design")
"""
from pipeline.llm.client import LLMClient
from pipeline.llm.config import LLMConfig, resolve
from pipeline.llm.errors import (
    BudgetExceeded,
    LLMError,
    MalformedResponse,
    ProviderError,
    ReplayInvalid,
    ReplayMissing,
    RetriesExhausted,
    TransientError,
)
from pipeline.llm.ledger import Ledger
from pipeline.llm.messages import CallContext, Message, Request, Response, ToolCall, ToolSpec, Usage
from pipeline.llm.retry import RetryPolicy

__all__ = [
    "BudgetExceeded", "CallContext", "LLMClient", "LLMConfig", "LLMError", "Ledger", "MalformedResponse",
    "Message", "ProviderError", "ReplayInvalid", "ReplayMissing", "Request", "Response",
    "RetriesExhausted", "RetryPolicy", "ToolCall", "ToolSpec", "TransientError", "Usage", "resolve",
]
