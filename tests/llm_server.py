"""A loopback model server for tests: real HTTP on 127.0.0.1 speaking the Anthropic Messages
(`POST /v1/messages`) and OpenAI Chat Completions (`POST /v1/chat/completions`) wire formats.

Each request takes the next step of `server.script` (or `server.rule(n)` when set, n counting
from 1), falling back to `Reply("ok")`. A step is a `Reply` (text, tool calls, usage, optional
delay) or a `Fault` (an HTTP error status with headers, a dropped connection, invalid JSON).
The server records every request body and how many were in flight at most.

Run it by hand for manual checks, e.g. a server that answers 429 to every other request:
    python tests/llm_server.py --every-other 429
"""
from __future__ import annotations

import argparse
import inspect
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


@dataclass
class Reply:
    text: str = "ok"
    tool_calls: list[tuple[str, dict]] = field(default_factory=list)  # (name, arguments)
    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0
    stop_reason: str | None = None  # None: derived (tool use or end of turn)
    delay: float = 0.0


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
        self.requests: list[dict[str, Any]] = []  # {"path", "body", "headers"}
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


def anthropic_body(reply: Reply, model: str) -> dict:
    content: list[dict] = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, (name, args) in enumerate(reply.tool_calls, start=1):
        content.append({"type": "tool_use", "id": f"toolu_{i:02d}", "name": name, "input": args})
    return {
        "id": "msg_loopback", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                  "cache_read_input_tokens": reply.cached_tokens, "cache_creation_input_tokens": 0},
    }


def openai_body(reply: Reply, model: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i:02d}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(reply.tool_calls, start=1)
        ]
    finish = reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": reply.input_tokens + reply.cached_tokens,
                  "completion_tokens": reply.output_tokens,
                  "total_tokens": reply.input_tokens + reply.cached_tokens + reply.output_tokens,
                  "prompt_tokens_details": {"cached_tokens": reply.cached_tokens}},
    }


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
            step = server._take_step({"path": self.path, "body": body, "headers": dict(self.headers)})
            try:
                time.sleep(step.delay)
                self._answer(step, body.get("model", ""))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up waiting (a timeout test)
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(self, step: Reply | Fault, model: str) -> None:
            anthropic_api = self.path.rstrip("/").endswith("/messages")
            if isinstance(step, Reply):
                payload = anthropic_body(step, model) if anthropic_api else openai_body(step, model)
                return self._send(200, json.dumps(payload).encode(), {})
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

        def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every-other", type=int, metavar="STATUS", help="fail requests 1, 3, 5, ... with STATUS")
    parser.add_argument("--always", type=int, metavar="STATUS", help="fail every request with STATUS")
    args = parser.parse_args()
    server = LLMServer()
    if args.every_other:
        server.rule = lambda n: Fault(status=args.every_other, headers={"retry-after": "1"}) if n % 2 == 1 else None
    if args.always:
        server.rule = lambda n: Fault(status=args.always, message="invalid x-api-key")
    server.start()
    print(f"listening on {server.url} (OpenAI base URL {server.openai_url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
