"""Run an episode in a sandbox worker, with the step cap enforced by the runner.

The environment's own done() may never say so; the runner stops at
`termination.max_steps` regardless and records that it had to.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pipeline.sandbox import SandboxFailure, Worker

# An observation larger than this is kept as its size and digest (enough to compare two runs):
# 100 steps of 8 MB observations would otherwise hold 800 MB.
KEEP_OBSERVATION_CHARS = 64 * 1024

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


def kept(observation: Any) -> Any:
    """`observation`, or past KEEP_OBSERVATION_CHARS a note of its size and digest that says so."""
    text = observation if isinstance(observation, str) else json.dumps(observation, sort_keys=True)
    if len(text) <= KEEP_OBSERVATION_CHARS:
        return observation
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
    return f"<observation of {len(text)} characters, cut: not kept; sha256 {digest}>"


def run_episode(worker: Worker, policy: Policy, max_steps: int, level: str | None = None,
                seed: int | None = None, on_step: Callable[[dict, dict], None] | None = None,
                deadline: tuple[float, str] | None = None) -> Episode:
    """`deadline`: (time.monotonic() value, what set it); past it the episode ends as a
    `wall_clock` failure."""
    first = start(worker, level, seed)
    episode = Episode(level, seed, observations=[kept(first["observation"])])
    observation = first["observation"]
    last: dict | None = None
    while episode.steps < max_steps:
        if deadline is not None and time.monotonic() > deadline[0]:
            raise SandboxFailure("wall_clock", f"stopped after {episode.steps} steps: {deadline[1]}", op="step")
        action = policy(observation, last)
        last = worker.call("step", action=action)
        episode.steps += 1
        episode.total_reward += last["reward"]
        episode.actions.append(action)
        episode.rewards.append(last["reward"])
        episode.events.append(last["events"])
        observation = last["observation"]
        episode.observations.append(kept(observation))
        if on_step:
            on_step(action, last)
        if last["done"]:
            episode.ended_by_env = True
            return episode
    episode.capped = True
    return episode
