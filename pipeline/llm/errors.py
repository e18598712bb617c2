"""Typed failures of the LLM layer.

`TransientError` and `MalformedResponse` are retried by `retry.py`; everything else ends the
call at once. All inherit `LLMError` so a stage can catch the family and record a rejection.
"""
from __future__ import annotations


class LLMError(Exception):
    """A model call failed; the message is meant for the user."""


class ProviderError(LLMError):
    """The provider refused the call (authentication, bad request, ...). Not retried.
    `status` is the HTTP status (0 when there was none); the message is the provider's own."""

    def __init__(self, message: str, status: int = 0, provider: str = ""):
        super().__init__(message)
        self.status = status
        self.provider = provider


class TransientError(LLMError):
    """Rate limit, overload, server error, timeout or dropped connection: worth retrying.
    `retry_after` is the delay in seconds the server asked for, if any."""

    def __init__(self, message: str, reason: str, retry_after: float | None = None):
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


class MalformedResponse(LLMError):
    """The provider answered, but not with something we can read (invalid JSON, missing fields,
    tool arguments that are not a JSON object). Retried a bounded number of times."""


class RetriesExhausted(LLMError):
    """Every attempt failed with a retryable error; `reasons` lists them in order."""

    def __init__(self, message: str, reasons: list[str]):
        super().__init__(message)
        self.reasons = reasons


class BudgetExceeded(LLMError):
    """The call would exceed a budget cap, so it was not made."""

    def __init__(self, message: str, scope: str, cap_usd: float, spent_usd: float, estimate_usd: float):
        super().__init__(message)
        self.scope = scope
        self.cap_usd = cap_usd
        self.spent_usd = spent_usd
        self.estimate_usd = estimate_usd


class ReplayMissing(LLMError):
    """Replay has no recording for this call; the message names theme, stage, index and path."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path


class ReplayInvalid(LLMError):
    """A recording exists but cannot be read as a response; the message names file and field."""
