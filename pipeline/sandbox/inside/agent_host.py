"""Worker-side host of a learned agent: the `agent_code` component of `envforge learn`.

Runs inside the sandbox, after confinement, in a worker started with `Worker(folder, host="agent")`
whose folder holds the candidate's `agent.py`. The agent's contract (pipeline/evaluate/react.py, the
built-in ReAct agent, is the seed and documents it in full):

    class Agent:
        def __init__(self, env: dict, llm): ...       # env: name, instruction, action_space, actions, max_steps
        def act(self, turn: dict) -> dict: ...        # {"action": {...}, "thought": ...} or {"error": "format", ...}

`llm(messages, max_tokens=None) -> str` is the only way out: it asks the parent, which makes the
model call with its own key and sends back the text. No key, client or network is here.

Operations: load (import agent.py, find the class), start (a fresh agent for one episode, from
a fresh import, so nothing carries over between episodes), act (one turn).
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from envforge.pipeline.sandbox.protocol import AGENT_FILE, AGENT_OPS, Dispatcher, Failure, ask_model

_modules = itertools.count()


class AgentHost(Dispatcher):
    def __init__(self, folder: str, ask: Callable[[str, dict], Any]):
        self.folder = Path(folder)
        self.ask = ask
        self.agent = None

    # -- protocol (the dispatch itself is protocol.Dispatcher.handle) ---------------------
    OPS = AGENT_OPS
    SUBJECT = "agent"
    TRACE_FRAMES = 6

    def refused(self, op: str) -> str:
        return "'act' before 'start'" if op == "act" and self.agent is None else ""

    def where(self) -> str:
        return _where()

    def op_load(self, env_id: Any = None) -> dict:
        return {"class": self._agent_class().__name__}

    def op_start(self, env: dict) -> dict:
        cls = self._agent_class()
        self.agent = cls(env, self.llm)
        return {"class": cls.__name__}

    def op_act(self, turn: dict) -> Any:
        return self.agent.act(turn)

    def op_ping(self) -> dict:
        return {"pong": True}

    def llm(self, messages: Any, max_tokens: int | None = None) -> str:
        return ask_model(self.ask, messages, max_tokens)

    def _agent_class(self) -> type:
        """The agent class of a fresh import of agent.py: `Agent`, else the last class with `act`."""
        path = self.folder / AGENT_FILE
        if not path.is_file():
            raise Failure("load", f"expected the file {AGENT_FILE}, found none", AGENT_FILE)
        name = f"envforge_agent_{next(_modules)}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, MemoryError):
                raise
            raise Failure("load", f"{type(e).__name__}: {e}", _where()) from None
        finally:
            sys.modules.pop(name, None)
        classes = [c for c in vars(module).values()
                   if inspect.isclass(c) and c.__module__ == name and callable(getattr(c, "act", None))]
        chosen = next((c for c in classes if c.__name__ == "Agent"), classes[-1] if classes else None)
        if chosen is None:
            raise Failure("load", f"{AGENT_FILE}: expected a class with an act(turn) method, found none", AGENT_FILE)
        return chosen


def _where() -> str:
    """agent.py:line of the innermost traceback frame in the agent's file."""
    where = ""
    for frame, lineno in traceback.walk_tb(sys.exc_info()[2]):
        if Path(frame.f_code.co_filename).name == AGENT_FILE:
            where = f"{AGENT_FILE}:{lineno}" if lineno is not None else AGENT_FILE  # a frame may have no line
    return where
