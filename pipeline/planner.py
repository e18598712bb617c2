"""Search over snapshots: the model-free skilled agent.

The search itself runs inside the sandbox worker, next to the environment (the worker's
`search` op in pipeline/sandbox/host.py): breadth-first over in-process snapshots, states
deduplicated by their canonical hash. Over IPC it would cost a round trip per node; in the
worker it steps tens of thousands of nodes a second. It returns the best total reward it
reached and the action sequence that reaches it (the witness), so a reported maximum can be
replayed through ordinary `step` calls and checked (`replay`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.sandbox import Worker

# Wall-clock slack on top of a search's own time budget before the worker call times out.
CALL_MARGIN_SECONDS = 15.0


@dataclass
class SearchResult:
    best_reward: float
    witness: list[dict] = field(default_factory=list)
    nodes: int = 0
    exhausted: bool = False  # the whole reachable space within max_steps was searched
    distinct_states: int = 0
    seconds: float = 0.0
    time_in_key: bool = True  # states at different steps were kept apart (see op_search)
    stopped: str | None = None  # the budget that ended it: "nodes", "seconds", "memory" or "bound"


def search(worker: Worker, actions: list[dict], max_steps: int, max_nodes: int = 50_000,
           seconds: float = 30.0, time_in_key: bool = True, stop_at: float | None = None) -> SearchResult:
    """Search from the worker's current state (reset it first) over `actions` (ActionSpace.candidates())."""
    reply = worker.call("search", timeout=seconds + CALL_MARGIN_SECONDS, actions=actions, max_steps=max_steps,
                        max_nodes=max_nodes, seconds=seconds, time_in_key=time_in_key, stop_at=stop_at)
    return SearchResult(float(reply["best_reward"]), reply["witness"], reply["nodes"], reply["exhausted"],
                        reply["distinct_states"], reply["seconds"], time_in_key, reply.get("stopped"))


def replay(worker: Worker, actions: list[dict]) -> tuple[float, bool, int]:
    """Play `actions` from the worker's current state through ordinary steps:
    (total reward, whether the episode ended, steps taken). Stops early if it ends."""
    total, steps = 0.0, 0
    for action in actions:
        out = worker.call("step", action=action)
        total += out["reward"]
        steps += 1
        if out["done"]:
            return total, True, steps
    return total, False, steps
