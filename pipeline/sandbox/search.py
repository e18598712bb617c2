"""Worker-side search over in-process snapshots: the planner behind verification, the planner
agent and derived tests. Runs inside the sandbox, next to the environment it searches."""
from __future__ import annotations

import time

from pipeline.runtime.levels import state_hash
from pipeline.sandbox import rngs
from pipeline.sandbox.faults import Failure, where


def breadth_first(host, actions: list[dict], max_steps: int, max_nodes: int = 50_000,
                  seconds: float = 30.0, time_in_key: bool = True, stop_at: float | None = None,
                  max_mb: float = 256.0) -> dict:
    """Breadth-first search from the current state over in-process snapshots.

    `host` is the worker's EnvHost (capture, apply, op_step, env); `max_steps` the episode's
    step cap as the parent sent it.

    Every node is one step of the environment's own `step`, from a copy of the parent's
    attributes and global RNG (a snapshot, as op_snapshot takes), so the search plays
    exactly the rules an agent meets. Nodes are merged by (hash of `_state`, total reward so far, `_t` unless
    time_in_key is false, global RNG state when it differs from the root's): `_state` is
    the true state by the runtime contract, the reward is in the key so a richer path to
    the same state is never dropped, `_t` because an environment may read the step counter
    (a tide on a clock, a deadline), so the same state at another time can have another
    future, and the RNG because a stochastic environment's future depends on it (for a
    deterministic one it never changes, so it costs nothing). Returns the best total
    reward reached within `max_steps` of the episode, the actions reaching it (the
    witness), the nodes stepped and whether the whole space was searched. With `stop_at`,
    the search ends after the layer (action-sequence length) in which the best total first
    reaches it: a better sequence of that length is still found, a longer one is not.
    `max_mb` bounds the snapshots held (the worker's memory limit must not end a search).
    `stopped` says which budget ended it, if any. The env is left in the state it had when
    the search began.
    """
    started = time.monotonic()
    horizon = int(max_steps)
    t0 = getattr(host.env, "_t", 0) or 0
    root = host.capture()
    parents: list[tuple[int, int]] = [(-1, -1)]  # node -> (parent node, action index)
    layer = [(0, root, 0.0)]
    seen = {(state_hash(getattr(host.env, "_state", None)), 0.0, t0 if time_in_key else None, None)}
    best, best_node, nodes, exhausted, stopped = 0.0, 0, 0, False, None
    held, layer_bytes = 0, 0  # bytes of snapshots in the next layer, in the current one
    depth = t0
    try:
        while layer and depth < horizon:
            if stop_at is not None and best >= stop_at:
                raise _Budget("bound")
            next_layer, layer_bytes, held = [], held, 0
            for node, snap, total in layer:
                for index, action in enumerate(actions):
                    if nodes >= max_nodes:
                        raise _Budget("nodes")
                    if time.monotonic() - started > seconds:
                        raise _Budget("seconds")
                    if layer_bytes + held > max_mb * 1024 * 1024:
                        raise _Budget("memory")
                    host.apply(snap)
                    try:
                        out = host.op_step(action)
                    except Failure as f:
                        raise Failure(f.kind, f"{f.detail} (after {_path(parents, node, actions) + [action]})", f.where)
                    except Exception as e:  # noqa: BLE001 - env code failed mid-search
                        raise Failure("exception", f"{type(e).__name__}: {e} (after "
                                      f"{_path(parents, node, actions) + [action]})", where()) from None
                    nodes += 1
                    parents.append((node, index))
                    child = len(parents) - 1
                    reached = total + out["reward"]
                    if reached > best:
                        best, best_node = reached, child
                    rng = rngs.state()
                    key = (out["state_hash"], round(reached, 9), out["t"] if time_in_key else None,
                           None if rngs.same(rng, root[1]) else rngs.key(rng))
                    if out["terminated"] or key in seen:
                        continue
                    seen.add(key)
                    captured = host.capture(like=snap)
                    next_layer.append((child, captured, reached))
                    held += _snapshot_bytes(captured, snap)
            layer = next_layer
            depth += 1
        exhausted = True
    except _Budget as budget:
        stopped = str(budget)
    witness, completion = _path(parents, best_node, actions), 0
    try:
        if stopped is not None:
            best, witness, completion = _complete_greedily(host, root, actions, witness, best, horizon - t0)
    finally:
        host.apply(root)
    return {"best_reward": best, "witness": witness, "nodes": nodes, "completion_steps": completion,
            "exhausted": exhausted, "stopped": stopped, "distinct_states": len(seen), "depth": depth - t0,
            "seconds": round(time.monotonic() - started, 3)}


def _complete_greedily(host, root: tuple, actions: list[dict], witness: list[dict], best: float,
                       steps_left: int) -> tuple[float, list[dict], int]:
    """After a budget cut the search: continue its best path to the episode's end, each step the
    action paying most at once. Rewards that accrue step by step (a cut search stops short of
    them) are then collected. Returns the better of the two paths and the steps it cost."""
    host.apply(root)
    total, done = 0.0, False
    for action in witness:
        out = host.op_step(action)
        total, done = total + out["reward"], out["terminated"]
    path, cost = list(witness), len(witness)
    while not done and len(path) < steps_left:
        here = host.capture()
        choice = None
        for action in actions:
            host.apply(here)
            out = host.op_step(action)
            cost += 1
            if choice is None or out["reward"] > choice[1]:
                choice = (action, out["reward"])
        host.apply(here)
        out = host.op_step(choice[0])
        cost += 1
        total, done = total + out["reward"], out["terminated"]
        path.append(choice[0])
        if total > best:
            best, witness = total, list(path)
    return best, witness, cost


class _Budget(Exception):
    """The search ran out of nodes or time."""


def _snapshot_bytes(snapshot: tuple, parent: tuple) -> int:
    """About what a snapshot holds: its pickle, or a guess for deep copies, plus an unshared RNG state."""
    attrs, rng = snapshot
    return (len(attrs) if isinstance(attrs, bytes) else 4096) + (0 if rng is parent[1] else 20_000)


def _path(parents: list[tuple[int, int]], node: int, actions: list[dict]) -> list[dict]:
    path = []
    while node > 0:
        node, index = parents[node]
        path.append(actions[index])
    return path[::-1]
