"""Search over snapshots: the model-free skilled agent.

Breadth-first search over the environment's own dynamics, in its sandbox worker,
with states deduplicated by their canonical hash. It returns the best total reward it
achieved and the action sequence that achieves it (the witness), so a reported
maximum can be replayed and checked.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dsl_schema.actions import Action
from pipeline.actions import sample_params
from pipeline.sandbox import Worker


@dataclass
class SearchResult:
    best_reward: float
    witness: list[dict] = field(default_factory=list)
    nodes: int = 0
    exhausted: bool = False  # the whole reachable space within max_steps was searched


def candidate_actions(space: list[Action]) -> list[dict]:
    """Every action with every enumerated parameter combination (ranges: both ends and middle)."""
    out = []
    for action in space:
        combos = [{}]
        for p in action.params:
            if p.enum:
                values = list(p.enum)
            elif p.range:
                lo, hi = p.range
                values = sorted({lo, hi, (lo + hi) // 2 if isinstance(lo, int) else (lo + hi) / 2})
            else:
                values = [sample_params(Action("", "", (p,)), __import__("random").Random(0))[p.name]]
            combos = [{**c, p.name: v} for c in combos for v in values]
        out += [{"action": action.name, "params": c} for c in combos]
    return out


def breadth_first(worker: Worker, space: list[Action], max_steps: int, level: str | None = None,
                  seed: int | None = None, max_nodes: int = 20_000) -> SearchResult:
    actions = candidate_actions(space)
    first = worker.call("reset", level=level, seed=seed) if level else worker.call("reset", generate=True, seed=seed)
    root = worker.call("snapshot")
    result = SearchResult(0.0)
    seen = {first["state_hash"]}
    frontier = deque([(root["handle"], 0.0, [])])
    while frontier:
        handle, total, path = frontier.popleft()
        if len(path) >= max_steps:
            continue
        for action in actions:
            if result.nodes >= max_nodes:
                worker.call("drop")
                return result
            worker.call("restore", handle=handle)
            step = worker.call("step", action=action)
            result.nodes += 1
            reward = total + step["reward"]
            if reward > result.best_reward:
                result.best_reward, result.witness = reward, path + [action]
            if step["done"] or (step["state_hash"], reward) in seen:
                continue
            seen.add((step["state_hash"], reward))
            frontier.append((worker.call("snapshot")["handle"], reward, path + [action]))
        worker.call("drop", handles=[handle])
    result.exhausted = True
    return result
