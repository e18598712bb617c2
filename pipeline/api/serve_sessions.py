"""The sessions `envforge serve` holds: admitted, refused, idled out and freed in one place.

A session is a WebSocket at /NAME/ws (OpenEnv's protocol, spoken by OpenEnv's HTTPEnvServer). This
layer wraps that route:

- **Admission.** At most `limit` sessions over every environment served. One more is accepted only
  to be told so: OpenEnv's `CAPACITY_REACHED` error is sent first, the connection is held until the
  client's first message (its reset reads the refusal, as OpenEnv's client does) or `REFUSED_SECONDS`,
  then closed with 1013 (try again later) naming it.
- **Freeing.** A session's slot is free the moment its client's close message (or its disconnect)
  is read, before its worker is shut down: a trainer that closes a session and opens another at
  capacity is admitted. Workers are counted apart (`Capacity.start_worker`): a new session's first
  reset waits for a closing worker to be gone, so there are never more workers than `limit`.
- **Idling.** A session whose client sends no message for `idle_seconds` is closed (its worker
  too), with close code 4408 and a reason saying so: what the client sees next names it.
"""
from __future__ import annotations

import asyncio
import json
import threading

from openenv.core.env_server.types import WSErrorCode, WSErrorResponse

REFUSED_SECONDS = 10.0  # how long a refused session is held for its client to read why
WORKER_WAIT_SECONDS = 60.0  # how long a reset waits for a closing session's worker to be gone
IDLE_CODE = 4408  # private use (4000-4999); the reason says what happened
CAPACITY_CODE = 1013  # try again later


class Capacity:
    """Sessions and sandbox workers over every environment served. Sessions are opened and freed on the
    event loop; workers are started and stopped in OpenEnv's executor threads."""

    def __init__(self, limit: int):
        self.limit = limit
        self.sessions = self.workers = 0
        self._changed = threading.Condition()

    def open_session(self) -> bool:
        with self._changed:
            if self.sessions >= self.limit:
                return False
            self.sessions += 1
            return True

    def close_session(self) -> None:
        with self._changed:
            self.sessions -= 1

    def start_worker(self) -> None:
        """Count a worker about to start; waits while a closed session's worker is still closing."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.workers < self.limit, WORKER_WAIT_SECONDS):
                raise RuntimeError(f"expected a closed session's sandbox worker to be gone within "
                                   f"{WORKER_WAIT_SECONDS:g}s, found all {self.limit} still running (--max-sessions)")
            self.workers += 1

    def worker_stopped(self) -> None:
        with self._changed:
            self.workers -= 1
            self._changed.notify_all()


class Sessions:
    """ASGI middleware over the app: every WebSocket whose path ends in /ws is a session."""

    def __init__(self, app, capacity: Capacity, idle_seconds: float):
        self.app, self.capacity, self.idle_seconds = app, capacity, idle_seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket" or not scope["path"].endswith("/ws"):
            return await self.app(scope, receive, send)
        if not self.capacity.open_session():
            return await self._refuse(receive, send)
        held, idled = True, False

        def free() -> None:
            nonlocal held
            if held:
                held = False
                self.capacity.close_session()

        async def client_message():
            nonlocal idled
            try:
                async with asyncio.timeout(self.idle_seconds):
                    message = await receive()
            except TimeoutError:
                idled = True
                free()
                return {"type": "websocket.disconnect", "code": IDLE_CODE}
            if message["type"] == "websocket.disconnect" or _is_close(message):
                free()  # before OpenEnv closes the worker: the slot is the next session's now
            return message

        async def server_message(message):
            if message["type"] == "websocket.close" and idled:
                message = {**message, "code": IDLE_CODE,
                           "reason": f"envforge: session closed after {self.idle_seconds:g}s without a message "
                                     f"(--idle-seconds); open a new one"}
            await send(message)

        try:
            await self.app(scope, client_message, server_message)
        finally:
            free()

    async def _refuse(self, receive, send) -> None:
        limit = self.capacity.limit
        text = (f"expected a free session, found all {limit} in use (--max-sessions {limit}): close one or try "
                "again later")
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        error = WSErrorResponse(data={"message": text, "code": WSErrorCode.CAPACITY_REACHED,
                                      "active_sessions": self.capacity.sessions, "max_sessions": limit})
        await send({"type": "websocket.send", "text": error.model_dump_json()})
        try:
            async with asyncio.timeout(REFUSED_SECONDS):
                first = await receive()
        except TimeoutError:
            first = None
        if first is None or first["type"] != "websocket.disconnect":
            await send({"type": "websocket.close", "code": CAPACITY_CODE,
                        "reason": f"CAPACITY_REACHED: all {limit} sessions in use (--max-sessions)"})


def _is_close(message: dict) -> bool:
    """OpenEnv's close message ({"type": "close"}), told from a small text frame without parsing others."""
    text = message.get("text")
    if message["type"] != "websocket.receive" or not text or len(text) > 200 or '"close"' not in text:
        return False
    try:
        return json.loads(text).get("type") == "close"
    except (ValueError, AttributeError):
        return False
