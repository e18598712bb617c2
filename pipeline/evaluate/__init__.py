"""`envforge evaluate`: agents on accepted environments, scored by normalized reward (AutoEnv §5).

    episode.py       one episode: the agent loop, its limits and stop reasons, its metrics
    agents.py        model-free baselines: random, planner (search over snapshots)
    model_agents.py  react (AutoEnv Appendix C.3) and tools (native tool calls)
    user_agent.py    a user's `run(env, env_info)` agent, in-process, over a proxy env
    (learned:PATH    a candidate exported by `envforge learn`: learning/export.py)
    runner.py        many episodes at once over a pool of sandbox workers; resume; progress
    records.py       episodes.jsonl, episodes.csv, one JSONL trajectory per episode
    report.py        aggregates, the Table 3 layout, report.md and plots
"""
from __future__ import annotations

from typing import Protocol

from pipeline.evaluate.agents import PlannerAgent, RandomAgent
from pipeline.evaluate.context import EnvTarget, EpisodeContext
from pipeline.evaluate.episode import Decision, Limits, Turn, play
from pipeline.evaluate.model_agents import ModelOptions, ReActAgent, ToolsAgent
from pipeline.evaluate.runner import Player
from pipeline.evaluate.user_agent import load_user_agent, play_user_agent

BUILT_IN = ("react", "tools", "random", "planner")
MODEL_AGENTS = ("react", "tools")
LEARNED = "learned:"  # learned:PATH, the best candidate `envforge learn` exported (a model agent)


class Agent(Protocol):
    """A built-in agent plays one episode: each turn it sees a Turn and returns a Decision."""

    async def act(self, turn: Turn) -> Decision: ...


def make_player(agent: str, *, client=None, model_options: ModelOptions = ModelOptions(),
                planner_nodes: int = 100_000, planner_seconds: float = 20.0, instruction: str | None = None) -> Player:
    """How an episode is played for `--agent agent` (a built-in name, learned:PATH, MODULE:ATTR or
    file.py:ATTR). `instruction`: react and tools show it in place of the environment's own."""
    if agent.startswith(LEARNED):
        from learning.export import learned_player  # learning builds on this package: imported when used

        return learned_player(agent[len(LEARNED):], client, model_options)
    if agent not in BUILT_IN:
        make_user_agent = load_user_agent(agent)
        return lambda ctx, tracker, log: play_user_agent(make_user_agent, ctx, tracker, log)
    plans: dict = {}
    factories = {
        "random": RandomAgent,
        "planner": lambda ctx: PlannerAgent(ctx, planner_nodes, planner_seconds, plans),
        "react": lambda ctx: ReActAgent(ctx, client, model_options, instruction),
        "tools": lambda ctx: ToolsAgent(ctx, client, model_options, instruction),
    }
    build = factories[agent]
    return lambda ctx, tracker, log: play(build(ctx), ctx.session, ctx.level, tracker, model_options.history, log)


__all__ = ["Agent", "BUILT_IN", "Decision", "EnvTarget", "EpisodeContext", "LEARNED", "Limits", "MODEL_AGENTS",
           "ModelOptions", "Turn", "make_player"]
