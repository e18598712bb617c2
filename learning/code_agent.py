"""The agent_code component at work: a candidate's agent.py plays episodes from a sandbox worker
(pipeline/sandbox/agent_host.py), and its model calls come back here, where the key is.

    CodeAgent      the Agent protocol of pipeline.evaluate (`await act(turn) -> Decision`) over an
                   agent worker: each turn is one "act" call; each model request the agent makes
                   during it is answered by the parent's client (at most MAX_CALLS_PER_TURN)
    code_player    a pipeline.evaluate Player for a folder holding agent.py
    check_code     the sandboxed check new code must pass before it is evaluated
"""
from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from pipeline.evaluate import Decision, EpisodeContext, ModelOptions, Turn
from pipeline.evaluate.episode import play
from pipeline.evaluate.model_agents import STAGE
from pipeline.evaluate.runner import Player
from pipeline.llm import BudgetExceeded, LLMError, Message
from pipeline.sandbox import Limits, SandboxFailure, Worker, WorkerPool
from pipeline.sandbox.agent_host import AGENT_FILE
from pipeline.sandbox.static import scan_file

MAX_CALLS_PER_TURN = 5
AGENT_LIMITS = Limits(call_seconds=10.0, cpu_seconds=600, memory_mb=1024)
ROLES = {"system": Message.system, "user": Message.user, "assistant": Message.assistant}


def write_code(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / AGENT_FILE
    if not path.is_file() or path.read_text(encoding="utf-8") != source:
        path.write_text(source, encoding="utf-8")
    return folder


def env_info(ctx: EpisodeContext, instruction: str) -> dict:
    env = ctx.env
    return {"name": env.name, "instruction": instruction, "action_space": env.action_space,
            "actions": [a.name for a in env.space], "max_steps": ctx.max_steps}


class CodeAgent:
    def __init__(self, worker: Worker, ctx: EpisodeContext, client, options: ModelOptions):
        self.worker, self.ctx, self.client, self.options = worker, ctx, client, options
        self.names = {a.name for a in ctx.env.space}

    async def act(self, turn: Turn) -> Decision:
        loop = asyncio.get_running_loop()
        spent = {"calls": 0, "tokens_in": 0, "tokens_out": 0, "dollars": 0.0, "retries": 0}
        refused: list[tuple[str, str]] = []  # (error kind, message) of requests not answered

        def on_request(kind: str, args: dict) -> dict:  # on the evaluation's thread; the call runs on the loop
            if kind != "model":
                return {"error": "usage", "message": f"unknown request {kind!r}"}
            if spent["calls"] >= MAX_CALLS_PER_TURN:
                return {"error": "limit", "message": f"at most {MAX_CALLS_PER_TURN} model calls per turn"}
            return asyncio.run_coroutine_threadsafe(self._model(args, spent, refused), loop).result()

        state = {"step": turn.step, "max_steps": turn.max_steps, "observation": turn.observation,
                 "last_action_result": turn.last_action_result, "history": turn.history}
        try:
            out = await self.ctx.session.blocking(self.worker.call, "act", turn=state, on_request=on_request)
        except SandboxFailure as f:
            out = f
        errors = dict(refused)
        if "budget" in errors:
            return Decision(error="budget", message=errors["budget"], **spent)
        if isinstance(out, SandboxFailure):
            if "model" in errors:
                return Decision(error="model", message=errors["model"], **spent)
            where = f" at {out.where}" if out.where else ""
            return Decision(error="agent", message=f"agent.py failed{where}: {out.kind}: {out.detail}", **spent)
        return decision_of(out, self.names, spent)

    async def _model(self, args: dict, spent: dict, refused: list) -> dict:
        messages = [ROLES.get(m["role"], Message.user)(m["content"]) for m in args.get("messages") or []]
        max_tokens = min(int(args.get("max_tokens") or self.options.max_tokens), self.options.max_tokens)
        try:
            response = await self.client.complete(messages, theme=self.ctx.env.name, stage=STAGE, max_tokens=max_tokens,
                                                  temperature=self.options.temperature, sample=self.ctx.run)
        except BudgetExceeded as e:
            refused.append(("budget", f"{e.scope}: {e}"))
            return {"error": "budget", "message": str(e)}
        except LLMError as e:
            spent["calls"] += 1
            refused.append(("model", f"{type(e).__name__}: {e}"))
            return {"error": "model", "message": str(e)}
        usage = response.usage
        spent["calls"] += 1
        spent["retries"] += len(response.retries)
        spent["tokens_in"] += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        spent["tokens_out"] += usage.output_tokens
        spent["dollars"] += response.cost_usd
        return {"text": response.text}


def decision_of(out, names: set[str], spent: dict) -> Decision:
    """What the agent's act() returned, as a Decision: an action of the declared space, or a
    format error saying what was expected and found."""
    if not isinstance(out, dict):
        return Decision(error="format", message=f"expected act() to return a dictionary, found {out!r:.120}", **spent)
    thought = str(out.get("thought") or "")
    if out.get("error") is not None or out.get("action") is None:
        message = str(out.get("message") or out.get("error") or "act() returned no action")
        return Decision(error="format", message=message, thought=thought, **spent)
    action = out["action"]
    if not (isinstance(action, dict) and isinstance(action.get("action"), str)
            and isinstance(action.get("params", {}), dict)):
        return Decision(error="format", message=f"expected {{\"action\": NAME, \"params\": {{...}}}}, found {action!r:.120}",
                        thought=thought, **spent)
    action = {"action": action["action"], "params": dict(action.get("params") or {})}
    if names and action["action"] not in names:
        return Decision(error="format", message=f"unknown action {action['action']!r}; expected one of "
                                                f"{', '.join(sorted(names))}", thought=thought, **spent)
    return Decision(action=action, thought=thought, **spent)


@contextlib.contextmanager
def _agent_worker(folder: Path, agents: WorkerPool | None):
    if agents is not None:
        with agents.lease(folder) as worker:
            yield worker
    else:
        with Worker(folder, AGENT_LIMITS, host="agent") as worker:
            yield worker


def code_player(folder: Path, instruction: str, client, options: ModelOptions, agents: WorkerPool | None = None) -> Player:
    """Episodes of the agent in `folder`/agent.py. `agents`: a pool of agent workers to reuse
    (the learner's); without one, each episode starts its own worker."""

    async def player(ctx: EpisodeContext, tracker, log):
        lease = _agent_worker(folder, agents)
        try:
            worker = await ctx.session.blocking(lease.__enter__)
        except SandboxFailure as f:
            tracker.stop("agent_error", f"agent.py did not load: {f.kind}: {f.detail}")
            return tracker
        try:
            await ctx.session.blocking(worker.call, "start", env=env_info(ctx, instruction))
            return await play(CodeAgent(worker, ctx, client, options), ctx.session, ctx.level, tracker, options.history, log)
        except SandboxFailure as f:
            tracker.stop("agent_error", f"agent.py failed to start: {f.kind}: {f.detail}")
            return tracker
        finally:
            await ctx.session.blocking(lease.__exit__, None, None, None)

    return player


def check_code(folder: Path, env: dict, turn: dict, reply: str, names: set[str], agents: WorkerPool) -> str:
    """Why the agent in `folder` may not be evaluated, or "" when it may: it must pass the static
    scan, load, start, and answer a sample turn with an action of the declared space, its model
    request answered by `reply` (a canned ReAct reply: the check costs no model call)."""
    problems = [p for p in scan_file(folder / AGENT_FILE, AGENT_FILE) if p.severity == "error"]
    if problems:
        return "; ".join(str(p) for p in problems[:5])
    try:
        with agents.lease(folder) as worker:
            worker.call("start", env=env)
            out = worker.call("act", turn=turn, on_request=lambda kind, args: {"text": reply})
    except SandboxFailure as f:
        where = f" at {f.where}" if f.where else ""
        return f"{AGENT_FILE}{where}: {f.kind}: {f.detail}"
    decision = decision_of(out, names, {})
    if decision.action is None:
        return f"{AGENT_FILE}: act() on a sample turn, given a well-formed reply, returned no action: {decision.message}"
    return ""
