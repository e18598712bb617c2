"""Run an episode in a sandbox worker, with the step cap enforced by the runtime.

The environment's own done() may never say so; the client truncates the episode at
`termination.max_steps` regardless, and the episode records which of the two ended it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from pipeline.sandbox.outside.client import EnvClient, Level, StepResult

# An observation larger than this is kept as its size and digest (enough to compare two runs):
# 100 steps of 8 MB observations would otherwise hold 800 MB.
KEEP_OBSERVATION_CHARS = 64 * 1024

# choose(observation, step_result_or_None) -> action dict
Policy = Callable[[Any, StepResult | None], dict]


@dataclass
class Episode:
    level: Level
    total_reward: float = 0.0
    steps: int = 0
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the runtime's step cap (or the caller's limit) ended it
    # done() itself ended it at the cap (`t >= max_steps` in the env's own done()): truncated all the
    # same, but no sign of an env whose episodes never end
    ended_at_cap: bool = False
    observations: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    events: list = field(default_factory=list)


def kept(observation: Any) -> Any:
    """`observation`, or past KEEP_OBSERVATION_CHARS a note of its size and digest that says so."""
    text = observation if isinstance(observation, str) else json.dumps(observation, sort_keys=True)
    if len(text) <= KEEP_OBSERVATION_CHARS:
        return observation
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
    return f"<observation of {len(text)} characters, cut: not kept; sha256 {digest}>"


def run_episode(env: EnvClient, policy: Policy, level: Level, seed: int = 0,
                on_step: Callable[[dict, StepResult], None] | None = None, limit: int | None = None,
                want_state: bool = False) -> Episode:
    """One episode of `policy` on `level` (`seed`: the RNG seed of a level file). `limit`: stop
    after that many steps even before the cap (counted as truncated). A wall-clock budget is the
    client's (`EnvClient.deadline`): past it the episode ends as a `wall_clock` failure.
    `want_state`: each step's result (as `on_step` sees it) carries the true state."""
    first = env.reset(level, seed, want_state=want_state)
    episode = Episode(level, observations=[kept(first.observation)])
    observation = first.observation
    last: StepResult | None = None
    while last is None or not (last.done or episode.steps == limit):
        action = policy(observation, last)
        last = env.step(action, want_state=want_state)
        episode.steps += 1
        episode.total_reward += last.reward
        episode.actions.append(action)
        episode.rewards.append(last.reward)
        episode.events.append(last.events)
        observation = last.observation
        episode.observations.append(kept(observation))
        if on_step:
            on_step(action, last)
    episode.terminated, episode.truncated = last.terminated, not last.terminated
    episode.ended_at_cap = last.capped
    return episode
