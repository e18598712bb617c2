"""The message protocol between envforge (sandbox/outside/) and a sandbox worker (sandbox/inside/):
what both sides must agree on, in one place.

A worker is started as `python -m WORKER_MODULE`; requests and replies are JSON lines on two
inherited pipes. Once confined and ready it writes `STARTED` unasked (up to there it runs envforge's
own code only: the parent times that against its start-up limit, and a start that exceeds it is an
infrastructure fault, never a verdict on the code the worker is to hold). Then it answers one
request at a time, the first being the opening operation (`OPENING`: loading the environment or
agent, the first call of its code, timed like every other call):

    request   {"op": NAME, "args": {...}, "timeout": SECONDS}
    reply     {"ok": true, "result": ...}
              {"ok": false, "kind": KIND, "detail": TEXT, "where": "file:line", "traceback": TEXT}

While handling a request a worker may ask the parent for something only the parent may do (a
learned agent's model call, `MODEL_REQUEST`): it writes {"request": KIND, "args": {...}} on the
reply pipe and reads {"answer": ..., "op": NAME} from the request pipe.

`Dispatcher.handle` is the one dispatch of a request to a host's `op_NAME` method: the
environment host (inside/host.py) and the agent host (inside/agent_host.py) both answer through
it. Everything a reply says is checked again on the parent's side (outside/replies.py): the
worker's own checks run beside untrusted code and are a courtesy.
"""
from __future__ import annotations

import json
import traceback
from typing import Any, Callable

WORKER_MODULE = "envforge.pipeline.sandbox.inside.worker"  # what the parent runs with `python -m`
STARTED = {"started": True}  # what a worker writes, unasked, once confined and ready for requests
OPENING = "load"  # the first request the parent sends a started worker: load what it holds
HOSTS = ("env", "agent")  # what a worker holds: an environment or a learned agent
ENV_OPS = ("load", "reset", "step", "observe", "snapshot", "restore", "drop", "search", "validate", "call", "ping")
AGENT_OPS = ("load", "start", "act", "ping")
MODEL_REQUEST = "model"  # a learned agent's model call, made by the parent with its own key
AGENT_FILE = "agent.py"  # the file a learned agent's folder holds
ENV_MOUNT = "/env"  # where a namespaced worker sees its environment folder


class Failure(Exception):
    """Something the code a worker runs did wrong, as the failure reply it becomes."""

    def __init__(self, kind: str, detail: str, where: str = ""):
        super().__init__(detail)
        self.kind, self.detail, self.where = kind, detail, where


def failure_reply(kind: str, detail: str, where: str = "", trace: str = "") -> dict:
    return {"ok": False, "kind": kind, "detail": detail, "where": where, "traceback": trace}


def encode(reply: dict) -> bytes:
    """One reply as a JSON line; data that is not plain JSON becomes a typed failure."""
    try:
        return (json.dumps(reply, allow_nan=False) + "\n").encode()
    except (TypeError, ValueError, RecursionError) as e:
        return (
            json.dumps(failure_reply("not_json", f"reply is not plain JSON: {type(e).__name__}: {e}")) + "\n"
        ).encode()


class Dispatcher:
    """A worker's host: answers each request with its `op_NAME` method, every fault a failure reply.

    A host names its operations (`OPS`), what the code it runs is called in messages (`SUBJECT`),
    and how a fault is located (`where`, `in_function`); `refused(op)` says why an operation may
    not run yet, `result(value)` makes a method's value the reply's result."""

    OPS: tuple[str, ...] = ()
    SUBJECT = "code"
    TRACE_FRAMES = 8
    NOT_JSON: tuple[type[BaseException], ...] = ()  # errors that mean the result is not plain JSON

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = getattr(self, f"op_{op}", None) if op in self.OPS else None
        if method is None:
            return failure_reply("usage", f"unknown operation {op!r}")
        refusal = self.refused(op)
        if refusal:
            return failure_reply("usage", refusal)
        try:
            return {"ok": True, "result": self.result(method(**request.get("args", {})))}
        except Failure as f:
            return failure_reply(f.kind, f.detail, f.where)
        except self.NOT_JSON as e:
            return failure_reply("not_json", f"reply is not plain JSON: {e}")
        except MemoryError:
            return failure_reply("memory", f"MemoryError: the {self.SUBJECT} exceeded its memory limit", self.where())
        except SystemExit as e:
            return failure_reply("exit", f"the {self.SUBJECT} called exit({e.code!r})", self.where())
        except BaseException as e:  # noqa: BLE001 - any error in the code a worker runs is a typed failure
            return failure_reply("exception", f"{type(e).__name__}{self.in_function()}: {e}", self.where(),
                                 traceback.format_exc(limit=-self.TRACE_FRAMES))

    def refused(self, op: str) -> str:
        return ""

    def result(self, value: Any) -> Any:
        return value

    def where(self) -> str:
        return ""

    def in_function(self) -> str:
        return ""


class ModelUnavailable(RuntimeError):
    """The parent made no model call for the agent (a budget cap, a failed call, a limit)."""


def ask_model(ask: Callable[[str, dict], Any], messages: Any, max_tokens: int | None = None) -> str:
    """One model call, made by the parent through `ask`: the `llm` an agent gets. `messages`: a
    string (one user message) or a list of {"role": "system" | "user" | "assistant", "content": str}."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    plain = [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))} for m in messages]
    answer = ask(MODEL_REQUEST, {"messages": plain, "max_tokens": int(max_tokens) if max_tokens else None})
    if not isinstance(answer, dict) or "text" not in answer:
        detail = answer.get("message", "") if isinstance(answer, dict) else ""
        raise ModelUnavailable(f"no model answer: {detail or answer!r}")
    return str(answer["text"])
