"""What the two SDK providers (anthropic_provider.py, openai_provider.py) do alike: send a
request's optional sampling fields under the API's names, make the call so that every SDK
failure comes out as one of our typed errors (http_errors.translate), read no more of a reply's
body than its max_tokens allows (trust.reply_byte_cap), and read a field of a reply as the
server sent it (the SDKs build reply objects without checking types)."""
from __future__ import annotations

import sys
from contextvars import ContextVar
from functools import cache
from typing import Any, AsyncIterator, Awaitable, Callable

from envforge.pipeline.llm.errors import MalformedResponse
from envforge.pipeline.llm.http_errors import translate
from envforge.pipeline.llm.messages import Request
from envforge.pipeline.llm.trust import ABSENT

# The most bytes of a reply body the current call reads (None: no bound); set by `call`.
_REPLY_BYTES: ContextVar[int | None] = ContextVar("envforge_reply_bytes", default=None)


class ReplyTooLarge(Exception):
    """A reply body longer than the call's bound; reading stopped."""


@cache
def _bounded_stream(base: type) -> type:
    """A byte stream over `base` (the AsyncByteStream of the SDK's HTTP library: httpx for
    openai 2, which verifiers 0.4 pins, httpx2 for openai 3 and anthropic 2) that stops at a limit:
    the library reads only a stream of its own class."""
    class Bounded(base):
        def __init__(self, stream: Any, limit: int):
            self._stream, self._limit = stream, limit

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._stream:
                seen += len(chunk)
                if seen > self._limit:
                    raise ReplyTooLarge(f"reply body longer than {self._limit:,} bytes; reading stopped there")
                yield chunk

        async def aclose(self) -> None:
            await self._stream.aclose()

    return Bounded


async def _bound_reply(response: Any) -> None:
    """httpx response hook, before the body is read: refuse a declared length over the bound,
    else read the body through a counter that stops at it."""
    limit = _REPLY_BYTES.get()
    if limit is None:
        return
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise ReplyTooLarge(f"reply body of {int(declared):,} bytes (content-length), more than {limit:,}; not read")
    library = sys.modules[type(response).__module__.partition(".")[0]]  # httpx or httpx2
    response.stream = _bounded_stream(library.AsyncByteStream)(response.stream, limit)


def http_client(sdk: Any, **kwargs: Any) -> Any:
    """The SDK's own default HTTP client (its timeouts, limits, proxies) with the reply bound."""
    return sdk.DefaultAsyncHttpxClient(event_hooks={"response": [_bound_reply]}, **kwargs)


def sampling_fields(request: Request, stop_field: str) -> dict[str, Any]:
    """temperature and the stop sequences, where the request sets them (`stop_field` is the API's name)."""
    fields: dict[str, Any] = {}
    if request.temperature is not None:
        fields["temperature"] = request.temperature
    if request.stop:
        fields[stop_field] = list(request.stop)
    return fields


async def call(create: Callable[..., Awaitable[Any]], kwargs: dict[str, Any], sdk: Any, provider: str,
               reply_bytes: int | None = None) -> Any:
    """`await create(**kwargs)` reading at most `reply_bytes` of the reply's body (an answered,
    billed reply over it is a MalformedResponse); an exception of any kind is translated, none
    escapes raw."""
    bound = _REPLY_BYTES.set(reply_bytes)
    try:
        return await create(**kwargs)
    except Exception as exc:  # noqa: BLE001 - every SDK failure is translated, none escapes raw
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ReplyTooLarge):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise MalformedResponse(f"{provider}: {cause}") from exc
        raise translate(exc, sdk, provider) from exc
    finally:
        _REPLY_BYTES.reset(bound)


def field(obj: Any, name: str) -> Any:
    """`obj`'s field `name` as the reply carried it, or `ABSENT`: an attribute of an SDK object, a
    key of a dict (a nested object the SDK left as one), or an extra field the SDK kept aside."""
    if isinstance(obj, dict):
        return obj.get(name, ABSENT)
    extra = getattr(obj, "model_extra", None) or {}
    fields_set = getattr(obj, "model_fields_set", None)
    if fields_set is not None and name not in fields_set and name not in extra:
        return ABSENT  # a declared field the reply did not send (the SDK fills in a default)
    return extra.get(name, getattr(obj, name, ABSENT))
