"""The agent_code component's check: what new agent code must pass, in the sandbox, before it is
evaluated. Playing episodes with agent code is pipeline.evaluate.hosted's `code_player`, and the
code starts as envforge's ReAct agent (pipeline/evaluate/react.py), so c0 is the same agent in
the prompt and the agent-code methods.
"""
from __future__ import annotations

from pathlib import Path

from envforge.pipeline.check.static import scan_file
from envforge.pipeline.evaluate.hosted import AGENT_LIMITS, agent_worker
from envforge.pipeline.evaluate.model_agents import agent_turn, decision_of, with_system
from envforge.pipeline.sandbox import SandboxFailure, WorkerPool
from envforge.pipeline.sandbox.protocol import AGENT_FILE

__all__ = ["AGENT_LIMITS", "check_code"]  # AGENT_LIMITS: the limits of the workers it leases from


def check_code(folder: Path, env: dict, turn: dict, reply: str, names: set[str], agents: WorkerPool) -> str:
    """Why the agent in `folder` may not be evaluated, or "" when it may: it must pass the static
    scan, load, start, and answer a sample turn with an action of the declared space, its model
    request answered by `reply` (a canned ReAct reply: the check costs no model call). `env` and
    `turn` are given as in an episode, their prompts rendered here."""
    problems = [p for p in scan_file(folder, AGENT_FILE) if p.severity == "error"]
    if problems:
        return "; ".join(str(p) for p in problems[:5])
    try:
        with agent_worker(folder, agents) as agent:
            agent.start(with_system(env))
            out = agent.act(agent_turn(turn), lambda kind, args: {"text": reply})
    except SandboxFailure as f:
        where = f" at {f.where}" if f.where else ""
        return f"{AGENT_FILE}{where}: {f.kind}: {f.detail}"
    decision = decision_of(out, names, {})
    if decision.action is None:
        return (
            f"{AGENT_FILE}: act() on a sample turn, given a well-formed reply, returned no action: {decision.message}"
        )
    return ""
