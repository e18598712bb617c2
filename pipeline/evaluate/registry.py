"""The one registry of agents: what `--agent SPEC` means, for evaluate, verify, learn and the
benchmarks alike.

    react, tools, random, planner   built in (agents.py, hosted.py, model_agents.py)
    PREFIX...                       registered by name prefix; the command layer registers
                                    `learned:PATH` (envforge learn's exported candidates), so this
                                    package never imports learning
    MODULE:ATTR, path/file.py:ATTR  a user's `run(env, env_info)` agent (user_agent.py)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from envforge.pipeline.evaluate.agents import PlannerAgent, RandomAgent
from envforge.pipeline.evaluate.episode import run_episode
from envforge.pipeline.evaluate.hosted import react_player
from envforge.pipeline.evaluate.model_agents import ModelOptions, ToolsAgent
from envforge.pipeline.evaluate.runner import Player
from envforge.pipeline.evaluate.user_agent import load_user_agent, play_user_agent


@dataclass(frozen=True)
class AgentOptions:
    """What building a player may use. `instruction`: react and tools show it in place of the
    environment's own (a learned prompt)."""

    client: Any = None
    model_options: ModelOptions = ModelOptions()
    planner_nodes: int = 100_000
    planner_seconds: float = 300.0  # a safety stop per search, not a budget (see PlannerAgent)
    instruction: str | None = None
    plans: dict = field(default_factory=dict)  # the planner's shared plans (one per evaluation)


@dataclass(frozen=True)
class AgentKind:
    """How one kind of agent is played. `build(argument, options)`: argument is what follows a
    prefix (the whole spec for a user agent). `model`: "calls" (it needs a model client), "none"
    (it calls no model) or "label" (it brings its own; --model only labels its records)."""

    build: Callable[[str, AgentOptions], Player]
    model: str


def _episodes(make: Callable[[Any, AgentOptions], Any]) -> Callable[[str, AgentOptions], Player]:
    """A kind whose agent object plays through the episode loop, one object per episode."""

    def build(_: str, o: AgentOptions) -> Player:
        return lambda ctx, tracker, log: run_episode(
            make(ctx, o), ctx.session, ctx.level, tracker, o.model_options.history, log
        )

    return build


def _user(spec: str, _: AgentOptions) -> Player:
    make = load_user_agent(spec)
    return lambda ctx, tracker, log: play_user_agent(make, ctx, tracker, log)


NAMED: dict[str, AgentKind] = {
    "react": AgentKind(lambda _, o: react_player(o.client, o.model_options, o.instruction), "calls"),
    "tools": AgentKind(_episodes(lambda ctx, o: ToolsAgent(ctx, o.client, o.model_options, o.instruction)), "calls"),
    "random": AgentKind(_episodes(lambda ctx, o: RandomAgent.for_episode(ctx)), "none"),
    "planner": AgentKind(
        _episodes(lambda ctx, o: PlannerAgent(ctx, o.planner_nodes, o.planner_seconds, o.plans)), "none"
    ),
}
PREFIXED: dict[str, AgentKind] = {}
USER = AgentKind(_user, "label")


def register_prefix(prefix: str, build: Callable[[str, AgentOptions], Player], model: str = "calls") -> None:
    """`--agent PREFIX<argument>` plays what `build(argument, options)` returns."""
    PREFIXED[prefix] = AgentKind(build, model)


def kind_of(spec: str) -> tuple[AgentKind, str]:
    """The kind of agent `spec` names, and the argument its build gets."""
    if spec in NAMED:
        return NAMED[spec], spec
    for prefix, kind in PREFIXED.items():
        if spec.startswith(prefix):
            return kind, spec[len(prefix):]
    return USER, spec


def make_player(spec: str, **options: Any) -> Player:
    """How an episode of `--agent spec` is played (options: AgentOptions' fields)."""
    kind, argument = kind_of(spec)
    return kind.build(argument, AgentOptions(**options))


def display_name(spec: str) -> str:
    """How records and reports name the agent: a built-in or prefixed spec as it is; a user's
    agent by its attribute, prefixed by the file's stem or the module (not by a path)."""
    kind, _ = kind_of(spec)
    if kind is not USER:
        return spec
    source, _, attr = spec.rpartition(":")
    stem = Path(source).stem if source.endswith(".py") or "/" in source else source
    return f"{stem}:{attr}" if stem and attr else spec
