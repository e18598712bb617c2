"""The LLM layer: one async client over Anthropic, OpenAI(-compatible) and replay, with
retries, a cost ledger and budgets, an on-disk response cache, and record/replay.

    from envforge.pipeline.llm import LLMClient, Message, ToolSpec
    response = await client.complete([Message.user("hi")], theme="maze", stage="design")
"""
from typing import TYPE_CHECKING

from envforge.pipeline.lazy import exports

# name -> the module defining it, imported on first use (PEP 562): a command that needs one piece of
# the layer (a price table, an error class) does not import the SDK clients, the cache and retries.
_EXPORTS = {
    "LLMClient": "client", "LLMConfig": "config", "resolve": "config", "Ledger": "ledger", "RetryPolicy": "retry",
    **dict.fromkeys(("BudgetExceeded", "LLMError", "MalformedResponse", "ProviderError", "ReplayInvalid",
                     "ReplayMissing", "RetriesExhausted", "TransientError"), "errors"),
    **dict.fromkeys(("CallContext", "Message", "Request", "Response", "ToolCall", "ToolSpec", "Usage"), "messages"),
}
__all__ = [
    "BudgetExceeded", "CallContext", "LLMClient", "LLMConfig", "LLMError", "Ledger", "MalformedResponse",
    "Message", "ProviderError", "ReplayInvalid", "ReplayMissing", "Request", "Response",
    "RetriesExhausted", "RetryPolicy", "ToolCall", "ToolSpec", "TransientError", "Usage", "resolve",
]


__getattr__ = exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from envforge.pipeline.llm.client import LLMClient
    from envforge.pipeline.llm.config import LLMConfig, resolve
    from envforge.pipeline.llm.errors import (
        BudgetExceeded,
        LLMError,
        MalformedResponse,
        ProviderError,
        ReplayInvalid,
        ReplayMissing,
        RetriesExhausted,
        TransientError,
    )
    from envforge.pipeline.llm.ledger import Ledger
    from envforge.pipeline.llm.messages import CallContext, Message, Request, Response, ToolCall, ToolSpec, Usage
    from envforge.pipeline.llm.retry import RetryPolicy
