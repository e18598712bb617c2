"""A loopback model server for tests, benchmarks and demo recordings: real HTTP on 127.0.0.1 speaking the Anthropic
Messages
(`POST /v1/messages`) and OpenAI Chat Completions (`POST /v1/chat/completions`) wire formats.

Each request takes the next step of `server.script` (or `server.rule(n)` when set, n counting
from 1), falling back to `Reply("ok")`. A step is a `Reply` (text, tool calls, usage, optional
delay) or a `Fault` (an HTTP error status with headers, a dropped connection, invalid JSON).
The server records every request body, its size in bytes, the bytes it answered with, and how
many requests were in flight at most.

It also misbehaves on demand, as a buggy provider or a runaway model does: a `Reply` whose
`usage` is a dict sends those numbers as they are (negative, NaN, strings, more cached tokens than
prompt tokens) under each wire's own field names, and `usage=None` sends no usage at all;
`forged_usage(kind)` makes the usage of each kind in `USAGE_FORGERIES`. A reply's text may be
tens of MB (`runaway_text`), or a `Bomb`: a gigabyte of text in a megabyte of gzip. Tool-call
arguments given as `RawJSON` are sent as that text (nested 100,000 deep, say). A Reply's
`input_tokens` left unset is counted as a provider would: the request's characters / 4.
tests/misbehaving.py drives `envforge generate` against it.

Run it by hand for manual checks, e.g. a server that answers 429 to every other request:
    python scripts/llm_server.py --every-other 429
"""
from __future__ import annotations

import inspect
import json
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


REPORTED = "reported"  # Reply.usage: the usage of input_tokens, output_tokens and cached_tokens


@dataclass(frozen=True)
class RawJSON:
    """Tool-call arguments sent as this JSON text, as is (nested 100,000 deep, say, which no JSON
    encoder writes): the Anthropic wire's `input`, the OpenAI wire's `arguments` string."""

    text: str


def _mark(i: int) -> str:
    return f"\x00raw arguments {i}\x00"


@dataclass
class Reply:
    text: str = "ok"
    tool_calls: list[tuple[str, dict | RawJSON]] = field(default_factory=list)  # (name, arguments)
    input_tokens: int | None = None  # None: as a provider counts, the request body's characters / 4
    output_tokens: int = 5
    cached_tokens: int = 0
    stop_reason: str | None = None  # None: derived (tool use or end of turn)
    delay: float = 0.0
    # REPORTED: the three token fields above, as a provider reports them. None: the reply carries
    # no usage. A dict {"input", "output", "cached"} (any of them; values of any JSON type, NaN
    # included): sent as is under the wire's names (input: prompt_tokens or input_tokens, which
    # on OpenAI include the cached ones; output: completion_tokens or output_tokens; cached:
    # prompt_tokens_details.cached_tokens or cache_read_input_tokens); a name left out is left out.
    usage: Any = REPORTED
    chunked: bool = False  # send the body in chunks with no content-length, as a streaming proxy does


# How buggy providers and forging servers report usage (issue 22): each kind as Reply.usage.
USAGE_FORGERIES: dict[str, Any] = {
    "negative": {"input": -100_000_000, "output": 50, "cached": 0},
    "nan": {"input": float("nan"), "output": float("nan"), "cached": 0},
    "string": {"input": "1200", "output": "lots", "cached": 0},
    "over_cached": {"input": 100, "output": 50, "cached": 10_000_000},
    "missing": None,
    "partial": {"output": 50},  # llama.cpp and some vLLM builds: no prompt count
    "implausible": {"input": 1, "output": 50, "cached": 0},  # 1 token a call, whatever was sent (issue 34)
}


def forged_usage(kind: str) -> Any:
    """Reply.usage for one kind of `USAGE_FORGERIES` (a fresh copy)."""
    value = USAGE_FORGERIES[kind]
    return dict(value) if isinstance(value, dict) else value


def runaway_text(megabytes: float, opening: str = "## Goal\n") -> str:
    """A reply of `megabytes` MB of prose, as a model that never stops writes."""
    line = "The model keeps writing about the environment and does not stop. "
    size = int(megabytes * 1_000_000)
    return (opening + line * (size // len(line) + 1))[:size]


@dataclass
class Fault:
    kind: str = "status"  # "status" | "drop" | "invalid_json"
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    delay: float = 0.0


@dataclass
class Bomb:
    """A reply whose text is `size` bytes of one letter, sent gzip-encoded and chunked: about 1 KB
    on the wire a MB of text, compressed as it is sent, so the server spends only what the client
    reads. Its usage is reported as a Reply's default."""

    size: int = 1_000_000_000
    delay: float = 0.0


BOMB_BLOCK = 1 << 20  # bytes of text one compressed block of a Bomb holds


def rate_limited(retry_after: str = "0") -> Fault:
    return Fault(status=429, headers={"retry-after": retry_after}, message="Rate limit reached, slow down")


class LLMServer:
    def __init__(self) -> None:
        self.script: list[Reply | Fault | Bomb] = []
        self.rule: Callable[..., Reply | Fault | Bomb | None] | None = None
        # {"path", "body", "headers", "bytes", "connection"}: the client's (host, port), one per TCP connection
        self.requests: list[dict[str, Any]] = []
        self.bytes_sent = 0  # response bodies, all requests together
        self.answers_cut = 0  # answers the client stopped reading (it closed the connection)
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> "LLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def count(self, path_suffix: str = "") -> int:
        return sum(1 for r in self.requests if r["path"].endswith(path_suffix))

    @property
    def bytes_received(self) -> int:
        """Request bodies, all requests together: what the client sent."""
        return sum(r["bytes"] for r in self.requests)

    @property
    def largest_request(self) -> int:
        return max((r["bytes"] for r in self.requests), default=0)

    def _take_step(self, request: dict[str, Any]) -> Reply | Fault | Bomb:
        """Record `request` and choose its answer, under one lock so numbering is exact."""
        with self._lock:
            self.requests.append(request)
            step = None
            if self.rule:  # rule(n), or rule(n, request) to answer by what was asked (the model, say)
                wants_request = len(inspect.signature(self.rule).parameters) > 1
                step = self.rule(len(self.requests), request) if wants_request else self.rule(len(self.requests))
            if step is None and self.script:
                step = self.script.pop(0)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return step or Reply()


def _usage_fields(reply: Reply) -> dict[str, Any] | None:
    """Reply.usage in neutral names ("input" including the cached tokens), or None for no usage."""
    if reply.usage is None:
        return None
    if reply.usage == REPORTED:
        return {"input": reply.input_tokens + reply.cached_tokens, "output": reply.output_tokens,
                "cached": reply.cached_tokens}
    return dict(reply.usage)


def anthropic_body(reply: Reply, model: str) -> dict:
    content: list[dict] = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, (name, args) in enumerate(reply.tool_calls, start=1):
        content.append({"type": "tool_use", "id": f"toolu_{i:02d}", "name": name,
                        "input": _mark(i) if isinstance(args, RawJSON) else args})
    body = {
        "id": "msg_loopback", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
    }
    fields = _usage_fields(reply)
    if fields is not None:
        usage: dict[str, Any] = {}
        if "input" in fields:  # Anthropic's input_tokens exclude the cache reads
            cached = fields.get("cached", 0)
            reported = reply.usage == REPORTED and isinstance(cached, int)
            usage["input_tokens"] = fields["input"] - cached if reported else fields["input"]
        if "output" in fields:
            usage["output_tokens"] = fields["output"]
        if "cached" in fields:
            usage["cache_read_input_tokens"] = fields["cached"]
            usage["cache_creation_input_tokens"] = 0
        body["usage"] = usage
    return body


def openai_body(reply: Reply, model: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i:02d}", "type": "function",
             "function": {"name": name, "arguments": args.text if isinstance(args, RawJSON) else json.dumps(args)}}
            for i, (name, args) in enumerate(reply.tool_calls, start=1)
        ]
    finish = reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")
    body = {
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    fields = _usage_fields(reply)
    if fields is not None:
        usage: dict[str, Any] = {}
        if "input" in fields:
            usage["prompt_tokens"] = fields["input"]
        if "output" in fields:
            usage["completion_tokens"] = fields["output"]
        if reply.usage == REPORTED:
            usage["total_tokens"] = fields["input"] + fields["output"]
        if "cached" in fields:
            usage["prompt_tokens_details"] = {"cached_tokens": fields["cached"]}
        body["usage"] = usage
    return body


def _handler_for(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Headers and body go out in separate writes; without this, Nagle's algorithm holds the
        # body back ~40 ms for the client's delayed ACK on every response.
        disable_nagle_algorithm = True
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            step = server._take_step({"path": self.path, "body": body, "headers": dict(self.headers),
                                      "bytes": length, "connection": tuple(self.client_address)})
            try:
                time.sleep(step.delay)
                if isinstance(step, Reply) and step.input_tokens is None:
                    step = replace(step, input_tokens=max(1, len(json.dumps(body)) // 4))
                self._answer(step, body.get("model", ""))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up waiting (a timeout test) or reading
                with server._lock:
                    server.answers_cut += 1
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(self, step: Reply | Fault | Bomb, model: str) -> None:
            anthropic_api = self.path.rstrip("/").endswith("/messages")
            if isinstance(step, Bomb):
                return self._send_bomb(step, model, anthropic_api)
            if isinstance(step, Reply):
                payload = json.dumps(anthropic_body(step, model) if anthropic_api else openai_body(step, model))
                for i, (_, args) in enumerate(step.tool_calls, start=1):
                    if isinstance(args, RawJSON):  # the Anthropic wire's input, put in as it is
                        payload = payload.replace(json.dumps(_mark(i)), args.text)
                return self._send(200, payload.encode(), {}, chunked=step.chunked)
            if step.kind == "drop":
                self.close_connection = True
                self.connection.shutdown(2)  # socket.SHUT_RDWR: the client sees the peer vanish
                return None
            if step.kind == "invalid_json":
                return self._send(200, b'{"id": "msg_broken", "content": [', {})
            message = step.message or f"loopback fault {step.status}"
            error_type = ERROR_TYPES.get(step.status, "api_error")
            error = ({"type": "error", "error": {"type": error_type, "message": message}} if anthropic_api
                     else {"error": {"message": message, "type": error_type, "code": None}})
            return self._send(step.status, json.dumps(error).encode(), step.headers)

        def _send(self, status: int, data: bytes, headers: dict[str, str], chunked: bool = False) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            if chunked:
                self.send_header("transfer-encoding", "chunked")
            else:
                self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if not chunked:
                self.wfile.write(data)
            for start in range(0, len(data) if chunked else 0, 65536):
                piece = data[start:start + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                with server._lock:
                    server.bytes_sent += len(piece)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            else:
                with server._lock:
                    server.bytes_sent += len(data)

        def _send_bomb(self, bomb: Bomb, model: str, anthropic_api: bool) -> None:
            mark = "\x00bomb\x00"
            wire = anthropic_body if anthropic_api else openai_body
            envelope = json.dumps(wire(Reply(mark, input_tokens=10), model))
            head, tail = (part.encode() for part in envelope.split(json.dumps(mark)[1:-1]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-encoding", "gzip")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for piece in _gzip_pieces(head, bomb.size, tail):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                with server._lock:
                    server.bytes_sent += len(piece)
            self.wfile.write(b"0\r\n\r\n")

    return Handler


def _gzip_pieces(head: bytes, size: int, tail: bytes):
    """A gzip member (RFC 1952) of `head`, `size` bytes of "a", `tail`, made as it is sent: one
    block of BOMB_BLOCK letters is compressed once (a full flush makes each copy of it the same
    bytes) and repeated; the checksum is computed over what is sent."""
    import struct
    import zlib

    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    letters = b"a" * BOMB_BLOCK
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(letters) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head)
    for start in range(0, size, BOMB_BLOCK):
        part = letters if start + BOMB_BLOCK <= size else letters[:size - start]
        crc = zlib.crc32(part, crc)
        yield block if len(part) == BOMB_BLOCK else deflate.compress(part) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc, total = zlib.crc32(tail, crc), len(head) + size + len(tail)
    yield deflate.compress(tail) + deflate.flush() + struct.pack("<II", crc, total & 0xFFFFFFFF)
