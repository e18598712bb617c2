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
tens of MB (`runaway_text`). tests/misbehaving.py drives `envforge generate` against it.

Run it by hand for manual checks, e.g. a server that answers 429 to every other request:
    python scripts/llm_server.py --every-other 429
"""
from __future__ import annotations

import inspect
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


REPORTED = "reported"  # Reply.usage: the usage of input_tokens, output_tokens and cached_tokens


@dataclass
class Reply:
    text: str = "ok"
    tool_calls: list[tuple[str, dict]] = field(default_factory=list)  # (name, arguments)
    input_tokens: int = 10
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


def rate_limited(retry_after: str = "0") -> Fault:
    return Fault(status=429, headers={"retry-after": retry_after}, message="Rate limit reached, slow down")


class LLMServer:
    def __init__(self) -> None:
        self.script: list[Reply | Fault] = []
        self.rule: Callable[..., Reply | Fault | None] | None = None
        self.requests: list[dict[str, Any]] = []  # {"path", "body", "headers", "bytes"}
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

    def _take_step(self, request: dict[str, Any]) -> Reply | Fault:
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
        content.append({"type": "tool_use", "id": f"toolu_{i:02d}", "name": name, "input": args})
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
            {"id": f"call_{i:02d}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
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
                                      "bytes": length})
            try:
                time.sleep(step.delay)
                self._answer(step, body.get("model", ""))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up waiting (a timeout test) or reading
                with server._lock:
                    server.answers_cut += 1
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(self, step: Reply | Fault, model: str) -> None:
            anthropic_api = self.path.rstrip("/").endswith("/messages")
            if isinstance(step, Reply):
                payload = anthropic_body(step, model) if anthropic_api else openai_body(step, model)
                return self._send(200, json.dumps(payload).encode(), {}, chunked=step.chunked)
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

    return Handler
