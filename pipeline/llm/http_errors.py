"""Turning an SDK exception into one of our typed errors, the same way for both SDKs.

Retryable: 408, 409, 429, every 5xx (529 is Anthropic's "overloaded"), timeouts and dropped
connections. Any other status (401, 403, 400, 404, ...) is final and keeps the provider's message.
"""
from __future__ import annotations

import email.utils
import time
from typing import Any

from envforge.pipeline.llm.errors import LLMError, MalformedResponse, ProviderError, TransientError

RETRYABLE_STATUSES = {408, 409, 429}
STATUS_NAMES = {408: "request timeout", 409: "conflict", 429: "rate limited", 529: "overloaded"}


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def provider_message(exc: Any) -> str:
    """The human message in the error body ({"error": {"message": ...}}), else the SDK's."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
    return str(getattr(exc, "message", "") or exc)


def translate(exc: BaseException, sdk: Any, provider: str) -> LLMError:
    """Map an exception raised by the `anthropic` or `openai` module `sdk` to our errors."""
    if isinstance(exc, sdk.APIResponseValidationError):
        return MalformedResponse(f"{provider}: response did not match the API schema: {exc}")
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        message = provider_message(exc)
        if status in RETRYABLE_STATUSES or status >= 500:
            reason = f"{status} {STATUS_NAMES.get(status, 'server error')}"
            retry_after = parse_retry_after(exc.response.headers)
            return TransientError(f"{provider}: HTTP {status}: {message}", reason, retry_after)
        return ProviderError(f"{provider}: HTTP {status}: {message}", status, provider)
    if isinstance(exc, sdk.APITimeoutError):
        return TransientError(f"{provider}: request timed out", "timeout")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return TransientError(f"{provider}: connection failed{detail}", "connection error")
    if isinstance(exc, ValueError):  # json.JSONDecodeError included
        return MalformedResponse(f"{provider}: unreadable response: {exc}")
    if isinstance(exc, LLMError):
        return exc
    return ProviderError(f"{provider}: {type(exc).__name__}: {exc}", 0, provider)
