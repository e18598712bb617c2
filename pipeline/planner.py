"""Search over snapshots: the model-free skilled agent.

The search itself runs inside the sandbox worker, next to the environment (`EnvClient.search`,
pipeline/sandbox/inside/search.py): best-first or breadth-first over in-process snapshots, states
merged by their canonical hash, its budget counted in nodes. Over IPC it would cost a round trip
per node; in the worker it steps thousands of nodes a second. It returns the best total reward it
reached and the action sequence that reaches it (the witness), so a reported maximum can be
replayed through ordinary `step` calls and checked (`replay`).
"""
from __future__ import annotations

from pipeline.sandbox.outside.client import EnvClient, SearchResult

__all__ = ["SearchResult", "candidates", "replay"]


def candidates(space, env: EnvClient) -> list[dict]:
    """The actions a search from the env's current state tries: the one action space
    (ActionSpace) on that state, so an untyped parameter without other evidence takes the
    values the state holds under its name (ActionSpace.for_state)."""
    return space.for_state(env.observe(want_state=True).state).candidates()


def replay(env: EnvClient, actions: list[dict]) -> tuple[float, bool, int]:
    """Play `actions` from the current state through ordinary steps:
    (total reward, whether the episode ended, steps taken). Stops early if it ends."""
    total, steps = 0.0, 0
    for action in actions:
        out = env.step(action)
        total += out.reward
        steps += 1
        if out.done:
            return total, True, steps
    return total, False, steps
