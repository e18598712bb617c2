"""Agents that act by a blocking call, their model requests answered here, where the key is:
envforge's ReAct agent (react.py, the built-in `react`) in this process, and agent code (a
learned agent.py) in a sandbox worker (pipeline/sandbox/inside/agent_host.py). Both get the same `env`
and `turn` (model_agents.agent_env, agent_turn), ask for models the same way (`llm`), and their
answers become Decisions the same way, so the seed of envforge learn's agent-code methods is
exactly the built-in agent.

    HostedAgent   the EpisodeAgent protocol (`await act(turn) -> Decision`) over `act(turn, on_request)`:
                  each model request the agent makes during a turn is answered by the parent's
                  client (at most MAX_CALLS_PER_TURN)
    react_player  a Player of the built-in ReAct agent
    code_player   a Player of the agent code in a folder holding agent.py
"""
from __future__ import annotations

import asyncio
import contextlib
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

from envforge.pipeline import records as files
from envforge.pipeline.evaluate import react
from envforge.pipeline.evaluate.context import EpisodeContext
from envforge.pipeline.evaluate.episode import Decision, Turn, run_episode
from envforge.pipeline.evaluate.model_agents import (
    ModelOptions,
    TurnError,
    agent_env,
    agent_turn,
    call_model,
    decision_of,
)
from envforge.pipeline.llm import Message
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits, Worker, WorkerPool
from envforge.pipeline.sandbox.outside.client import AgentClient
from envforge.pipeline.sandbox.protocol import AGENT_FILE, ask_model

MAX_CALLS_PER_TURN = 5
# A model request from agent code is hostile input: at most this many characters of message text
# per call and per episode (45 MB of prompt in 3 turns was seen), and at most this many messages.
MAX_REQUEST_CHARS = 400_000
MAX_EPISODE_REQUEST_CHARS = 4_000_000
MAX_REQUEST_MESSAGES = 200
AGENT_LIMITS = SandboxLimits(call_seconds=10.0, cpu_seconds=600, memory_mb=1024)
ROLES = {"system": Message.system, "user": Message.user, "assistant": Message.assistant}
SEED_SOURCE = Path(react.__file__)  # the agent code envforge learn starts from
OnRequest = Callable[[str, dict], dict]


def write_code(folder: Path, source: str) -> Path:
    path = folder / AGENT_FILE
    if not path.is_file() or path.read_text(encoding="utf-8") != source:
        files.write_text(path, source)
    return folder


class HostedAgent:
    def __init__(self, act: Callable[[dict, OnRequest], Any], ctx: EpisodeContext, client, options: ModelOptions,
                 name: str = AGENT_FILE):
        """`act(turn, on_request)`: one turn of the agent (blocking; raises SandboxFailure).
        `name`: what its failures call it."""
        self._act, self.ctx, self.client, self.options, self.name = act, ctx, client, options, name
        self.names = {a.name for a in ctx.env.actions}
        self.request_chars = 0  # over the episode (one HostedAgent plays one episode)

    async def act(self, turn: Turn) -> Decision:
        loop = asyncio.get_running_loop()
        spent: dict = {"calls": 0}
        refused: list[TurnError] = []  # why requests were not answered (kind, message, a cap's scope)

        def on_request(kind: str, args: dict) -> dict:  # on the evaluation's thread; the call runs on the loop
            if kind != "model":
                return {"error": "usage", "message": f"unknown request {kind!r}"}
            if spent["calls"] >= MAX_CALLS_PER_TURN:
                return {"error": "limit", "message": f"at most {MAX_CALLS_PER_TURN} model calls per turn"}
            try:
                messages, max_tokens = self._request(args)
            except ValueError as e:
                refused.append(TurnError("agent", str(e)))
                return {"error": "usage", "message": str(e)}
            return asyncio.run_coroutine_threadsafe(self._model(messages, max_tokens, spent, refused), loop).result()

        try:
            out = await self.ctx.session.blocking(self._act, agent_turn(turn), on_request)
        except SandboxFailure as f:
            out = f
        errors = {e.kind: e for e in refused}
        if "budget" in errors:
            budget = errors["budget"]
            return Decision(error="budget", message=str(budget), budget_scope=budget.scope, **spent)
        if "agent" in errors:  # a bad request is the agent's failure, whatever it did next
            return Decision(error="agent", message=f"{self.name} made a bad model request: {errors['agent']}", **spent)
        if isinstance(out, SandboxFailure):
            if "model" in errors:
                return Decision(error="model", message=str(errors["model"]), **spent)
            where = f" at {out.where}" if out.where else ""
            return Decision(error="agent", message=f"{self.name} failed{where}: {out.kind}: {out.detail}", **spent)
        return decision_of(out, self.names, spent)

    def _request(self, args: Any) -> tuple[list[Message], int | None]:
        """The messages and max_tokens of a model request, checked; ValueError says what is wrong."""
        if not isinstance(args, dict) or not isinstance(args.get("messages"), list):
            raise ValueError(
                f"expected {{'messages': [...], 'max_tokens': ...}}, found {type(args).__name__}"
                + (f" with messages of type {type(args.get('messages')).__name__}" if isinstance(args, dict) else "")
            )
        raw = args["messages"]
        if not 0 < len(raw) <= MAX_REQUEST_MESSAGES:
            raise ValueError(f"expected 1 to {MAX_REQUEST_MESSAGES} messages, found {len(raw)}")
        for i, m in enumerate(raw):
            if not (isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)):
                raise ValueError(f"messages[{i}]: expected {{'role': one of {sorted(ROLES)}, 'content': text}}, "
                                 f"found {str(m)[:80]!r}")
        size = sum(len(m["content"]) for m in raw)
        if size > MAX_REQUEST_CHARS:
            raise ValueError(f"expected at most {MAX_REQUEST_CHARS} characters in one request, found {size}")
        if self.request_chars + size > MAX_EPISODE_REQUEST_CHARS:
            raise ValueError(f"expected at most {MAX_EPISODE_REQUEST_CHARS} characters of requests in an episode, "
                             f"found {self.request_chars + size}")
        self.request_chars += size
        asked = args.get("max_tokens")
        max_tokens = asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None
        return [ROLES[m["role"]](m["content"]) for m in raw], max_tokens

    async def _model(self, messages: list[Message], max_tokens: int | None, spent: dict, refused: list) -> dict:
        try:
            response = await call_model(self.ctx, self.client, self.options, messages, spent, max_tokens=max_tokens)
        except TurnError as e:
            refused.append(e)
            return {"error": e.kind, "message": str(e)}
        return {"text": response.text}


class InProcess:
    """envforge's own ReAct agent class, run in this process as the agent host runs agent code in
    the sandbox (it is envforge's code, not a model's)."""

    def __init__(self, env: dict):
        self.on_request: OnRequest | None = None
        self.agent = react.Agent(
            env, lambda messages, max_tokens=None: ask_model(self.on_request, messages, max_tokens)
        )

    def act(self, turn: dict, on_request: OnRequest) -> Any:
        self.on_request = on_request
        try:
            return self.agent.act(turn)
        except Exception as e:  # noqa: BLE001 - typed as a worker's failure would be
            frame = traceback.extract_tb(e.__traceback__)[-1]
            raise SandboxFailure(
                "exception", f"{type(e).__name__}: {e}", f"{Path(frame.filename).name}:{frame.lineno}"
            ) from None


def react_player(client, options: ModelOptions, instruction: str | None = None):
    """Episodes of the built-in ReAct agent. `instruction`: shown in place of the environment's own."""

    async def player(ctx: EpisodeContext, tracker, log):
        agent = InProcess(agent_env(ctx, instruction))
        return await run_episode(
            HostedAgent(agent.act, ctx, client, options, "the ReAct agent"),
            ctx.session,
            ctx.level,
            tracker,
            options.history,
            log,
        )

    return player


@contextlib.contextmanager
def agent_worker(folder: Path, agents: WorkerPool | None) -> Iterator[AgentClient]:
    """The agent in `folder`/agent.py in a worker: one of `agents`, else a fresh one."""
    if agents is not None:
        with agents.lease(folder) as worker:
            yield AgentClient(worker)
    else:
        with Worker(folder, AGENT_LIMITS, host="agent") as worker:
            yield AgentClient(worker)


def code_player(folder: Path, instruction: str, client, options: ModelOptions, agents: WorkerPool | None = None):
    """Episodes of the agent in `folder`/agent.py, in the sandbox. `agents`: a pool of agent
    workers to reuse (the learner's); without one, each episode starts its own worker."""

    async def player(ctx: EpisodeContext, tracker, log):
        lease = agent_worker(folder, agents)
        try:
            agent = await ctx.session.blocking(lease.__enter__)
        except SandboxFailure as f:
            tracker.stop("agent_error", f"agent.py did not load: {f.kind}: {f.detail}")
            return tracker
        try:
            await ctx.session.blocking(agent.start, agent_env(ctx, instruction))
            return await run_episode(
                HostedAgent(agent.act, ctx, client, options), ctx.session, ctx.level, tracker, options.history, log
            )
        except SandboxFailure as f:
            tracker.stop("agent_error", f"agent.py failed to start: {f.kind}: {f.detail}")
            return tracker
        finally:
            await ctx.session.blocking(lease.__exit__, None, None, None)

    return player
