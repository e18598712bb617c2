"""`envforge evaluate`: agents on accepted environments, scored by normalized reward (AutoEnv §5).

    episode.py       one episode: the one engine (agent loop, limits, stop reasons, metrics)
    registry.py      the one registry of agents: what `--agent SPEC` means
    agents.py        model-free baselines: random, planner (search over snapshots)
    react.py         envforge's ReAct agent (AutoEnv Appendix C.3): the built-in react, and the
                     agent code envforge learn starts from
    hosted.py        agents acting by blocking calls: react in process, agent code in the sandbox
    model_agents.py  what model agents share (prompts, model calls, decisions) and tools
    user_agent.py    a user's `run(env, env_info)` agent, in-process, over a proxy env
    runner.py        many episodes at once over a pool of sandbox workers; resume; progress
    records.py       episodes.jsonl, episodes.csv, one JSONL trajectory per episode
    report.py        aggregates, the Table 3 layout, report.md and plots
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from envforge.pipeline.lazy import exports

# name -> the module defining it, imported on first use (PEP 562): `envforge check` uses the random
# agent (agents.py) without importing the registry, the model agents and their prompts.
_EXPORTS = {"EpisodeContext": "context", "Decision": "episode", "Limits": "episode", "Turn": "episode",
            "run_episode": "episode", "ModelOptions": "model_agents", "display_name": "registry",
            "kind_of": "registry", "make_player": "registry", "register_prefix": "registry"}


__getattr__ = exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from envforge.pipeline.evaluate.context import EpisodeContext
    from envforge.pipeline.evaluate.episode import Decision, Limits, Turn, run_episode
    from envforge.pipeline.evaluate.model_agents import ModelOptions
    from envforge.pipeline.evaluate.registry import display_name, kind_of, make_player, register_prefix


class EpisodeAgent(Protocol):
    """A built-in agent plays one episode: each turn it sees a Turn and returns a Decision."""

    async def act(self, turn: Turn) -> Decision: ...


__all__ = ["Decision", "EpisodeAgent", "EpisodeContext", "Limits", "ModelOptions", "Turn", "display_name",
           "kind_of", "make_player", "register_prefix", "run_episode"]
