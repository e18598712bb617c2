"""Run an episode in a sandbox worker, with the step cap enforced by the runner.

The environment's own done() may never say so; the runner stops at
`termination.max_steps` regardless and records that it had to.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pipeline.sandbox import Worker

# choose(observation, step_result_or_None) -> action dict
Policy = Callable[[Any, dict | None], dict]


@dataclass
class Episode:
    level: str | None
    seed: int | None
    total_reward: float = 0.0
    steps: int = 0
    ended_by_env: bool = False  # done() said so
    capped: bool = False  # the runner stopped it at max_steps
    observations: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    events: list = field(default_factory=list)


def start(worker: Worker, level: str | None = None, seed: int | None = None, want_state: bool = False) -> dict:
    if level is None:
        return worker.call("reset", generate=True, seed=seed, want_state=want_state)
    return worker.call("reset", level=level, seed=seed, want_state=want_state)


def run_episode(worker: Worker, policy: Policy, max_steps: int, level: str | None = None,
                seed: int | None = None, on_step: Callable[[dict, dict], None] | None = None) -> Episode:
    first = start(worker, level, seed)
    episode = Episode(level, seed, observations=[first["observation"]])
    last: dict | None = None
    while episode.steps < max_steps:
        action = policy(episode.observations[-1], last)
        last = worker.call("step", action=action)
        episode.steps += 1
        episode.total_reward += last["reward"]
        episode.actions.append(action)
        episode.rewards.append(last["reward"])
        episode.events.append(last["events"])
        episode.observations.append(last["observation"])
        if on_step:
            on_step(action, last)
        if last["done"]:
            episode.ended_by_env = True
            return episode
    episode.capped = True
    return episode
