"""The one retry policy of the project (tenacity).

Transient failures (429, 5xx, 529, timeouts, dropped connections) are retried with exponential
backoff plus jitter, waiting exactly what the server asked for when it sent `Retry-After`.
Malformed responses are retried at most `malformed_attempts` times in all. Anything else
(authentication, other 4xx, budget, missing recording) is raised at once.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from envforge.pipeline.llm.errors import MalformedResponse, RetriesExhausted, TransientError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8  # total attempts of one call, first included
    malformed_attempts: int = 3
    base_delay: float = 1.0  # seconds; the n-th retry waits about base_delay * 2**n
    max_delay: float = 60.0
    max_retry_after: float = 300.0  # longest server-requested wait we accept before giving up
    max_elapsed: float = 900.0  # seconds one call may spend failing and waiting before giving up


def reason_of(exc: BaseException | None) -> str:
    if isinstance(exc, TransientError):
        return exc.reason
    if isinstance(exc, MalformedResponse):
        return "malformed response"
    return type(exc).__name__


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]], policy: RetryPolicy
) -> tuple[T, tuple[str, ...]]:
    """Run `attempt` until it succeeds; return its result and why earlier attempts failed."""
    reasons: list[str] = []
    out_of_time: list[float] = []
    backoff = wait_exponential_jitter(
        multiplier=policy.base_delay, max=policy.max_delay, jitter=policy.base_delay
    )

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            # The server said how long; a little jitter spreads concurrent callers apart.
            return exc.retry_after + random.uniform(0, 0.1 * policy.base_delay)
        # Never sleep past the call's time limit: the last attempt comes as the limit runs out.
        return min(backoff(state), max(0.0, policy.max_elapsed - state.seconds_since_start))

    def stop(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, MalformedResponse):
            return reasons.count("malformed response") + 1 >= policy.malformed_attempts
        if isinstance(exc, TransientError) and (exc.retry_after or 0) > policy.max_retry_after:
            return True
        if state.seconds_since_start >= policy.max_elapsed:
            out_of_time.append(state.seconds_since_start)
            return True
        return state.attempt_number >= policy.max_attempts

    def remember(state: RetryCallState) -> None:
        reasons.append(reason_of(state.outcome.exception() if state.outcome else None))

    retrying = AsyncRetrying(
        retry=retry_if_exception_type((TransientError, MalformedResponse)),
        stop=stop,
        wait=wait,
        before_sleep=remember,
        reraise=True,
    )
    try:
        async for trial in retrying:
            with trial:
                result = await attempt()
    except TransientError as exc:
        reasons.append(exc.reason)
        limit = (f" and {out_of_time[0]:.0f} s, the limit for one call being {policy.max_elapsed:g} s"
                 if out_of_time else "")
        raise RetriesExhausted(
            f"{exc} — gave up after {len(reasons)} attempts{limit} ({', '.join(reasons)})", reasons
        ) from exc
    except MalformedResponse as exc:
        reasons.append("malformed response")
        raise MalformedResponse(f"{exc} — gave up after {len(reasons)} attempts") from exc
    return result, tuple(reasons)
