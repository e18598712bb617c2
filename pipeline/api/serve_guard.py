"""The connections `envforge serve` holds, bounded so that slow or silent clients cannot hold them all.

uvicorn starts no timer before a request's first byte and counts every open connection against
`limit_concurrency`: sixty sockets that connected and sent nothing kept every legitimate request at
503. Here each connection is `GuardedH11`, uvicorn's HTTP/1.1 protocol with deadlines and a cap:

- a request's head must arrive within `seconds` of the connection (or of the previous response),
  and then its body within `seconds` more; a late head gets 408 and the connection is closed, a
  late body likewise (or the connection is closed when a response has begun);
- at most `total` connections at once, at most `per_client` from one address. A connection over a
  cap closes the longest-waiting connection that has no request in progress (of that address, or
  of any): a new client is served, and what waits is what goes. When none is waiting, the new
  connection gets 503.

A WebSocket upgrade's head is a request head like any other; once upgraded, the connection counts
until it closes, and the session layer (serve.py) bounds what it waits for.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass
class Guard:
    """What the server's connections are doing, on the event loop's thread (no locking needed)."""

    total: int
    per_client: int
    seconds: float
    waiting: dict = field(default_factory=dict)  # connection -> when it began waiting for a request head
    open: list = field(default_factory=list)  # every connection admitted and not yet closed
    closed: Counter = field(default_factory=Counter)  # why the guard closed connections (head, body, room, full)

    def admit(self, conn: GuardedH11) -> bool:
        """Room for `conn`, made by closing a waiting connection if need be; False: refused (503 sent)."""
        self.open = [c for c in self.open if not c.transport.is_closing()]
        for limit, peers in ((self.per_client, [c for c in self.open if c.host == conn.host]), (self.total, self.open)):
            if len(peers) >= limit and not self._make_room(peers):
                self.closed["full"] += 1
                conn.reply_and_close(503, f"expected at most {self.total} open connections ({self.per_client} from "
                                     "one address), found every one with a request in progress: try again later")
                return False
        self.open.append(conn)
        return True

    def _make_room(self, peers: list) -> bool:
        idle = [c for c in peers if c in self.waiting]
        if not idle:
            return False
        oldest = min(idle, key=self.waiting.__getitem__)
        self.closed["room"] += 1
        if oldest.requests:  # idle between requests: closing it is what keep-alive allows
            oldest.transport.close()
        else:
            oldest.reply_and_close(503, "closed to make room for a new connection: this one sent no request in "
                                   f"{time.monotonic() - self.waiting[oldest]:.1f}s")
        oldest.stop_waiting()
        return True


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol under the Guard. `guard` is set on the subclass `protocol(guard)` makes."""

    guard: Guard

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.host = self.client[0] if self.client else ""
        self.requests = 0
        self._timer = None
        if self.guard.admit(self):
            self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may parse a pipelined request's head already received
        if not self.transport.is_closing():
            self._await_head()
            self._track()

    def connection_lost(self, exc) -> None:
        self.stop_waiting()
        super().connection_lost(exc)

    def _track(self) -> None:
        """After h11 read what came: the head arrived (the body's deadline starts, if one follows),
        the body arrived, or the connection is closing or is a WebSocket's now."""
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            self.stop_waiting()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            return
        if self in self.guard.waiting:
            self.requests += 1
            self.stop_waiting()
            if state is h11.SEND_BODY:
                self._timer = self.loop.call_later(self.guard.seconds, self._body_late)
        elif state is not h11.SEND_BODY:
            self._cancel()

    def stop_waiting(self) -> None:
        self.guard.waiting.pop(self, None)
        self._cancel()

    def reply_and_close(self, status: int, text: str) -> None:
        """Answer outside h11's request cycle (no request, or none complete) and close."""
        body = text.encode()
        reason = {408: b"Request Timeout", 503: b"Service Unavailable"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
                             b"content-length: %d\r\n\r\n%s" % (status, reason, len(body), body))
        self.transport.close()

    def _await_head(self) -> None:
        self._cancel()
        self.guard.waiting[self] = time.monotonic()
        self._timer = self.loop.call_later(self.guard.seconds, self._head_late)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_late(self) -> None:
        self._timer = None
        if self in self.guard.waiting and not self.transport.is_closing():
            self.guard.closed["head"] += 1
            self.stop_waiting()
            self.reply_and_close(408, f"expected a request's head within {self.guard.seconds:g}s, found it "
                                 "incomplete: closed (--request-seconds)")

    def _body_late(self) -> None:
        self._timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        self.guard.closed["body"] += 1
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            text = (f"expected the request's body within {self.guard.seconds:g}s of its head, found it incomplete: "
                    "closed (--request-seconds)").encode()
            for event in (h11.Response(status_code=408, headers=[(b"content-type", b"text/plain; charset=utf-8"),
                                                                (b"connection", b"close"),
                                                                (b"content-length", str(len(text)).encode())]),
                          h11.Data(data=text), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        if cycle is not None:  # the app reading the body is told the client is gone; its reply goes nowhere
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()


def protocol(guard: Guard) -> type[GuardedH11]:
    """The protocol class uvicorn is given (Config(http=...)): GuardedH11 bound to `guard`."""
    return type("GuardedH11", (GuardedH11,), {"guard": guard})
