"""What the two SDK providers (anthropic_provider.py, openai_provider.py) do alike: send a
request's optional sampling fields under the API's names, make the call so that every SDK
failure comes out as one of our typed errors (http_errors.translate), read a reply's body
bounded, and read a tool call's arguments bounded.

The body bound (trust.reply_byte_cap) counts the bytes as sent and as decoded: envforge asks for
gzip or deflate at most and undoes them itself, in pieces of at most PIECE_BYTES, so a small
compressed body that inflates to gigabytes is refused at the cap with no more than the cap held
(the SDK's HTTP client would hold all of it before anyone counted). The body is then parsed by
the one bounded JSON reader (safe_io.parse_json), not by the SDK: nesting, integer lengths, and a
tool call's arguments nested too deep are refused for that one call (`tool_call`), which the
model is told, never an internal error.

A request is the body envforge builds, posted as it is (`call`): the SDKs' typed `create` walks
every message through their TypedDict transform first, which changes nothing in the bodies envforge
sends and cost ~1 ms of CPU a call. The SDK clients, each with its HTTP connection pool, live as long
as the provider and are reused by every call (`Clients`)."""
from __future__ import annotations

import contextlib
import sys
import zlib
from contextvars import ContextVar
from functools import cache
from typing import Any, AsyncIterator, Callable, Iterable, Iterator

from envforge.pipeline import safe_io
from envforge.pipeline.llm.errors import MalformedResponse
from envforge.pipeline.llm.http_errors import translate
from envforge.pipeline.llm.messages import Request, ToolCall
from envforge.pipeline.llm.trust import ABSENT
from envforge.pipeline.located import LocatedError

# The most bytes of a reply body the current call reads (None: no bound); set by `call`.
_REPLY_BYTES: ContextVar[int | None] = ContextVar("envforge_reply_bytes", default=None)
CODINGS = ("gzip", "deflate")  # the content codings asked for (Accept-Encoding), undone here
PIECE_BYTES = 64 * 1024  # the most decoded bytes one step of a decoder makes
# Requests in flight on one SDK client (one HTTP connection pool) before another client is made:
# httpcore's pool walks its connections in a loop over its connections each time a request starts
# or ends, O(connections²) a request (at 32 in flight, two thirds of the host's CPU per turn went there).
CLIENT_REQUESTS = 8
ARGUMENTS_DEPTH = safe_io.MAX_DEPTH  # levels of lists and objects in one tool call's arguments


class ReplyRefused(Exception):
    """A reply body not read whole: longer than the call's bound (as sent or decoded), or not in a
    coding it was asked for."""


class _Inflater:
    """One content coding undone in pieces of at most PIECE_BYTES bytes."""

    def __init__(self, coding: str):
        self.coding, self._started = coding, False
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS)

    def feed(self, pieces: Iterable[bytes], last: bool) -> Iterator[bytes]:
        for data in pieces:
            while True:
                try:
                    out = self._z.decompress(data, PIECE_BYTES)
                except zlib.error as exc:
                    if self.coding == "deflate" and not self._started:  # raw deflate, as some servers send
                        self._z, self._started = zlib.decompressobj(-zlib.MAX_WBITS), True
                        continue
                    raise ReplyRefused(f"reply body is not valid {self.coding} ({exc}); not read") from None
                self._started = True
                if out:
                    yield out
                data = self._z.unconsumed_tail
                if self._z.eof or not (out or data):
                    break
        if last:
            yield self._z.flush()  # what zlib holds back once all input is in: less than its window


@cache
def _decoded_stream(base: type) -> type:
    """`_Decoded` over `base`, the AsyncByteStream of the SDK's HTTP library (httpx for openai 2,
    which verifiers 0.4 pins, httpx2 for openai 3 and anthropic 2): it reads only its own class."""

    class Decoded(base):
        """A body as sent, its codings undone, counted as sent and as decoded: either count passing
        `limit` stops reading there (the connection is then closed, not drained)."""

        def __init__(self, stream: Any, codings: list[str], limit: int):
            self._stream, self._limit = stream, limit
            self._inflaters = [_Inflater(c) for c in reversed(codings)]  # the last applied is undone first
            self._how = f" once decoded from {', '.join(codings)}" if codings else ""

        def _undo(self, data: bytes, last: bool) -> Iterator[bytes]:
            pieces: Iterable[bytes] = [data]
            for inflater in self._inflaters:
                pieces = inflater.feed(pieces, last)
            return iter(pieces)

        async def __aiter__(self) -> AsyncIterator[bytes]:
            sent = decoded = 0
            done = False
            chunks = self._stream.__aiter__()
            while not done:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    chunk, done = b"", True
                sent += len(chunk)
                if sent > self._limit:
                    raise ReplyRefused(f"reply body longer than {self._limit:,} bytes; reading stopped there")
                for piece in self._undo(chunk, done):
                    decoded += len(piece)
                    if decoded > self._limit:
                        raise ReplyRefused(f"reply body longer than {self._limit:,} bytes{self._how}; "
                                           f"reading stopped there")
                    if piece:
                        yield piece

        async def aclose(self) -> None:
            await self._stream.aclose()

    return Decoded


async def _bound_reply(response: Any) -> None:
    """httpx response hook, before the body is read: refuse a declared length over the bound or a
    coding not asked for, else read the body through `_decoded_stream` (httpx then decodes nothing)."""
    limit = _REPLY_BYTES.get()
    if limit is None:
        return
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise ReplyRefused(f"reply body of {int(declared):,} bytes (content-length), more than {limit:,}; not read")
    codings = [c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)]
    codings = [c for c in codings if c and c != "identity"]
    other = next((c for c in codings if c not in CODINGS), None)
    if other is not None:
        raise ReplyRefused(f"reply body in content-encoding {other[:40]!r}, which was not asked for "
                           f"(accepted: {', '.join(CODINGS)}); not read")
    if codings:
        del response.headers["content-encoding"]
    library = sys.modules[type(response).__module__.partition(".")[0]]  # httpx or httpx2
    response.stream = _decoded_stream(library.AsyncByteStream)(response.stream, codings, limit)


def http_client(sdk: Any, **kwargs: Any) -> Any:
    """The SDK's own default HTTP client (its timeouts, limits, proxies) with the reply bound."""
    return sdk.DefaultAsyncHttpxClient(event_hooks={"response": [_bound_reply]},
                                       headers={"accept-encoding": ", ".join(CODINGS)}, **kwargs)


def sampling_fields(request: Request, stop_field: str) -> dict[str, Any]:
    """temperature and the stop sequences, where the request sets them (`stop_field` is the API's name)."""
    fields: dict[str, Any] = {}
    if request.temperature is not None:
        fields["temperature"] = request.temperature
    if request.stop:
        fields[stop_field] = list(request.stop)
    return fields


class Clients:
    """The SDK clients of one provider, made by `make()` as needed and reused for its life: a call
    goes to the one with fewest requests in flight, a new one is made only when each has
    CLIENT_REQUESTS, so every HTTP connection pool stays small (see CLIENT_REQUESTS) and each
    keeps its connections alive between calls. One event loop uses them (LLMClient's rule)."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._leases: list[list] = []  # [client, requests in flight], one per client

    @property
    def clients(self) -> list[Any]:
        return [client for client, _ in self._leases]

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Any]:
        # The entry itself is held, not its index: `close` (an interrupted run's shutdown) may clear
        # the list while a call is still in flight, and that call's end must find its own count.
        held = min(self._leases, key=lambda lease: lease[1], default=None)
        if held is None or held[1] >= CLIENT_REQUESTS:
            held = [self._make(), 0]
            self._leases.append(held)
        held[1] += 1
        try:
            yield held[0]
        finally:
            held[1] -= 1

    async def close(self) -> None:
        leases, self._leases = self._leases, []
        for client, _ in leases:
            await client.close()


@cache
def _response_class(sdk: Any) -> type:
    """The Response class of the SDK's HTTP library (httpx or httpx2): `post` with it as `cast_to`
    returns the HTTP response itself, its body read (through `_bound_reply`) and not parsed."""
    return sys.modules[sdk.DefaultAsyncHttpxClient.__mro__[1].__module__.partition(".")[0]].Response


async def call(client: Any, path: str, body: dict[str, Any], sdk: Any, provider: str,
               reply_bytes: int | None = None, depth: int = safe_io.MAX_DEPTH) -> Any:
    """The JSON body of the reply to `body` posted to `path` by the SDK `client` (its headers,
    authentication, timeouts and errors: the SDK's), reading at most `reply_bytes` of it and
    parsing it bounded, values nested deeper than `depth` replaced by safe_io.TOO_DEEP; an
    answered, billed reply we cannot read is a MalformedResponse; an exception of any kind is
    translated, none escapes raw."""
    bound = _REPLY_BYTES.set(reply_bytes)
    try:
        response = await client.post(path, cast_to=_response_class(sdk), body=body)
        data = await response.aread()
    except Exception as exc:  # noqa: BLE001 - every SDK failure is translated, none escapes raw
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ReplyRefused):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise MalformedResponse(f"{provider}: {cause}") from exc
        raise translate(exc, sdk, provider) from exc
    finally:
        _REPLY_BYTES.reset(bound)
    try:
        return safe_io.parse_json(safe_io.decode(data, "reply body"), f"{provider} reply body", finite=False,
                                  most=depth, cut_deep=True)
    except LocatedError as exc:
        raise MalformedResponse(f"{provider}: {exc}") from None


def tool_call(provider: str, call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """A tool call of a reply: an id and a name (strings) and its arguments, an object. Arguments
    nested deeper than ARGUMENTS_DEPTH make a call whose `problem` says so (the model is told, the
    tool does not run); any other shape is a MalformedResponse."""
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise MalformedResponse(f"{provider}: a tool call without a string id and name: id {str(call_id)[:40]!r}, "
                                f"name {str(name)[:40]!r}")
    if arguments is safe_io.TOO_DEEP or safe_io.holds_too_deep(arguments):
        return ToolCall(call_id, name, {}, problem=f"the arguments are nested more than {ARGUMENTS_DEPTH} levels "
                                                   f"deep; they were not read (send flat arguments)")
    if not isinstance(arguments, dict):
        raise MalformedResponse(f"{provider}: arguments of tool call {name[:60]!r} are not an object")
    return ToolCall(call_id, name, arguments)


def field(obj: Any, name: str) -> Any:
    """`obj`'s field `name` as the reply carried it, or `ABSENT` (no such field, or `obj` is no object)."""
    return obj.get(name, ABSENT) if isinstance(obj, dict) else ABSENT


def text_field(obj: Any, name: str, provider: str, where: str) -> str:
    """A field that is text or absent ("" then); anything else is a MalformedResponse."""
    value = field(obj, name)
    if value in (ABSENT, None):
        return ""
    if not isinstance(value, str):
        raise MalformedResponse(f"{provider}: {where}.{name} is {type(value).__name__}, expected text")
    return value
