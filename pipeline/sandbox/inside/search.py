"""Worker-side search over in-process snapshots: the one search behind verification's max rewards,
the planner agent, execution's planner episode and the derived plan tests. Runs inside the
sandbox, next to the environment it searches.

Budgets are counted in nodes (one node: one `step` of the environment from a restored snapshot),
so the same call finds the same witness and the same best reward on an idle and on a busy machine.
A wall-clock limit (`seconds`) is only a safety stop: a search it cuts says so (`stopped:
"seconds"`), and its caller labels the figure as load-dependent.

Two orders, one frontier:
  * "breadth": first in, first out; the order that proves (exhausting the reachable space).
  * "best": best-first with a one-step lookahead: when a node is expanded every child is stepped,
    and each child is queued with its parent's value, the best total among that parent's
    children. A reward that only an ending action pays (submit an answer, declare a result) is
    then seen one step early, so the search digs along the partial answers that pay most. Among
    equal values the state with the least steps taken plus twice its distance to an end condition
    comes first (a weighted A*, so its paths fit the step cap; `goals`: the DSL's
    `A == B` conditions as pairs of paths into `_state`, the first in its order that is still a
    goal; nearness: how far the scalars of one side are from their places in the other when both
    are arrangements of the same distinct scalars, else how many differ; a condition met by an end
    that paid nothing is dropped, it is no goal), then a
    *novel* state (one holding a value at some path of `_state` that no state before it held: a
    new position, a new cell revealed), then first in, first out; so with no reward in sight the
    search heads for the goal the DSL names (a sliding puzzle's target pattern, 15-27 moves away,
    within 20,000 nodes) or spreads over the world, and far goals are met in a few hundred nodes
    where breadth-first drowns in orderings of the same moves.

Beam dives beside best-first, in the same node budget, frontier and transposition table: when
best-first has stepped half the budget (DIVE_SHARE) and no step paid, breadth is failing (a push
puzzle's crates, 15 moves deep among orderings of the same moves), and dives take turns with it
(each runs when best-first has stepped as many nodes as the dives so far), each DIVE_GROWTH times
wider than the last (DIVE_WIDTH first). A dive starts from the root and expands, layer after layer
to the step cap, the `width` children with the highest total, then the most atoms no state of the
dive held before (a short list of scalars, a position, is one atom: a crate on a new square), then
the nearest goal, then a draw from a generator seeded by the dive's number (so the same nodes on
any machine). Every child a dive steps enters the table; one new to it is queued on the frontier
as best-first's are, so nothing a dive passes by is lost to best-first, and a queued node a dive
expands is skipped when the frontier reaches it. A dive goes on through states the table already
held (best-first queued or expanded them; the dive's own set of states keeps it from going round),
so it is not stopped at the edge of what best-first saw. Exhaustion, proofs and pruning are those
of best-first: the frontier still holds every child not dominated.
(Iterative deepening was not added: under a node budget a depth-limited pass re-steps the layers
above its limit, so it reaches no deeper than breadth-first within the same nodes.)

A queued node holds no snapshot: it is made again when it is expanded (its parent's snapshot
restored, its action stepped again; not counted as a node), so a search captures one snapshot
per expanded node instead of one per child queued, most of which a budget-cut best-first search
never expands.

Nodes are merged in a transposition table keyed by the canonical hash of `_state` (the true
state by the runtime contract), the global RNG state when it differs from the root's (a
stochastic env's future depends on it), and, with `time_in_key`, the step counter `_t`. A
node is dropped when the table holds the same key reached at no later step with no less
reward (it cannot do better from there). Without `time_in_key` the key also leaves out every
integer of `_state` that counts the steps (found at the root: one more after every action, or one
less: steps taken or steps remaining), so a
state reached at different steps is one state: fast, but exhausting that space proves nothing
when the environment reads its clock, so only a search with `time_in_key` reports `exhausted`
as a proof.

`bound` is the DSL's reward bound, {"values": [...], "step": P, "once": bool} (pipeline/planner.py,
reward_bound): the hypothesis that every step pays one of `values` (or 0), and, when `once` (a
binary reward), that a step paying P ends the episode. Under it the reward still to come from a
node `d` steps before the cap is at most P when `once`, else d x P: an admissible reward-to-go
bound. The search uses it twice: it stops once the best total meets the bound from its start
(`proof: "upper_bound"`: nothing does better), and it prunes every branch whose total plus that
bound cannot beat the best (or `floor`, a total the caller already reached): branch and bound
(`pruned` counts them). It checks the hypothesis on every step it takes; a step that breaks it
refutes the bound (`bound_refuted` says how and where), which is not used after that, and a
search that pruned before the refutation is no longer exhaustive (what it pruned was judged by a
wrong bound). `upper_bound` returns the bound from the start while it stands.

`evidence` is what the steps taken showed, a hypothesis and never a proof: the largest reward a
step paid, and whether every paying step ended the episode (then, if no step the search did not
take pays more, no episode scores more than that one step's reward).
"""
from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
import time

from envforge.pipeline.runtime.levels import state_hash
from envforge.pipeline.sandbox.inside import rngs
from envforge.pipeline.sandbox.inside.faults import where
from envforge.pipeline.sandbox.protocol import Failure

EPS = 1e-9
MAX_ATOMS = 4096  # scalars of a state the novelty test reads
MAX_DEPTH = 32  # ... and how deep it looks
ORDERS = ("breadth", "best")
# Beam dives beside best-first (module docstring): none in a search of fewer than DIVE_AFTER nodes; the
# first once best-first has stepped 1/DIVE_SHARE of the budget with no step paid, DIVE_WIDTH wide.
DIVE_AFTER = 256
DIVE_SHARE = 2
DIVE_WIDTH = 32
DIVE_GROWTH = 4
MAX_RUN = 3  # a list of at most this many scalars (a position) is one atom of a dive's novelty


def run(host, actions: list[dict], max_steps: int, max_nodes: int = 50_000, seconds: float | None = None,
        time_in_key: bool = True, stop_at: float | None = None, max_mb: float = 256.0, order: str = "breadth",
        bound: dict | None = None, goals: list | None = None, floor: float | None = None) -> dict:
    """Search from the current state within `max_steps` of the episode; see the module docstring.

    `host` is the worker's EnvHost (snapshots.capture and .apply, op_step, env). `stop_at`: a target (the
    validator's bound, a certified max): breadth-first ends after the depth at which the best
    first reaches it (a better sequence of that length is still found), best-first at once.
    `max_mb` bounds the snapshots held (the worker's memory limit must not end a search).
    Returns the best total reached, the actions reaching it (the witness), the nodes stepped,
    whether the whole space was searched, which budget stopped it (`stopped`) and the proof of
    the best when there is one. The env is left in the state it had when the search began.
    """
    if order not in ORDERS:
        raise Failure("usage", f"search order: expected one of {list(ORDERS)}, found {order!r}")
    goals = _goals(goals, getattr(host.env, "_state", None)) if order == "best" else []
    started = time.monotonic()
    horizon = int(max_steps)
    t0 = getattr(host.env, "_t", 0) or 0
    root = host.snapshots.capture()
    counters = [] if time_in_key else _step_counters(host, root, actions, horizon - t0)
    parents: list[tuple[int, int]] = [(-1, -1)]  # node -> (parent node, action index)
    seen: dict = {}  # key -> [(depth, total)] not dominated
    _dominated(seen, _key(host, counters, t0 if time_in_key else None, None), t0, 0.0)
    atoms: set = set()  # best-first: every (path, value) of a state seen so far (novelty)
    if order == "best":
        _novel(atoms, getattr(host.env, "_state", None), counters)
    # A frontier entry holds no snapshot of its own: (priority, order, node, parent's snapshot, total,
    # depth). Its state is made again when it is expanded (the parent's snapshot restored, the
    # node's action stepped again), so only expanded nodes are captured, not every child queued.
    frontier: list = [((0,), 0, 0, None, 0.0, t0)]
    best, best_node, nodes, stopped, refuted = 0.0, 0, 0, None, None
    reached_at = None  # depth at which the best first met stop_at
    held, sequence = _snapshot_bytes(root, root), 1
    pending: dict[int, list] = {}  # expanded node -> [children queued, its snapshot's bytes]
    if bound is not None and not (isinstance(bound.get("step"), (int, float)) and bound["step"] > 0):
        raise Failure("usage", f"search bound: expected a positive 'step', found {bound!r}")
    floor = float(floor) if floor is not None else None
    pruned = 0
    # Evidence (never a proof): the largest step reward seen, and whether every step paying more than
    # nothing ended the episode (`evidence`).
    paid_most, paid_went_on = 0.0, False
    # Difficulty evidence (pipeline/difficulty.py): the node count at which the best was last raised,
    # and the distinct successor states of each expanded state (by transposition key).
    # `target_at`, `target_depth`: the nodes stepped when the best first met stop_at, and the steps it
    # took; `depth_reached`: the depth (steps from the start) of the last node expanded, so in breadth
    # order every shorter path was stepped.
    best_at, target_at, target_depth, expanded, successors, depth_reached = 0, None, None, 0, 0, 0

    def to_go(depth: int) -> float | None:
        """The bound on the reward still to come `horizon - depth` steps before the cap; None without one."""
        if bound is None:
            return None
        return bound["step"] if bound.get("once") else bound["step"] * max(0, horizon - depth)

    def hopeless(total: float, depth: int) -> bool:
        """Whether a node cannot beat the best (or the floor) by the bound: it is pruned."""
        ahead = to_go(depth)
        return ahead is not None and total + ahead <= max(best, -math.inf if floor is None else floor) + EPS

    start_bound = to_go(t0)
    # What the env is known to hold with no env code run since: the snapshot it was captured in or
    # restored to (`current`), and the global RNG state it has (`rng_now`), so a restore of that
    # same state is skipped, and setting the RNG state it already has too (same values either way).
    current, rng_now = root, root[1]

    def restore(snap: tuple) -> None:
        nonlocal current, rng_now
        if snap is not current:
            host.snapshots.apply(snap, rng=snap[1] is not rng_now)
        current, rng_now = None, None  # env code runs next

    # Beam dives (best-first only; see the module docstring). `queued`: node -> its frontier entry while
    # it waits there unexpanded; a node a dive expands is dropped from it, and the heap skips it.
    dives = order == "best" and max_nodes >= DIVE_AFTER
    queued: dict[int, tuple] = {}
    spent = {"best": 0, "dive": 0, "dives": 0}

    def expand(node: int, parent_snap, total: float, depth: int) -> list[tuple]:
        """Step every action from `node` (its state remade from `parent_snap`, or the root's); queue
        the children that are kept on the frontier. Returns them: (child, total, new atoms, distance)."""
        nonlocal best, best_node, nodes, refuted, bound, start_bound, goals, reached_at, held, sequence
        nonlocal pruned, paid_most, paid_went_on, current, rng_now
        nonlocal best_at, target_at, target_depth, expanded, successors, depth_reached
        if parent_snap is not None:
            restore(parent_snap)
            snap = _remake(host, parents, node, parent_snap, actions)
            current, rng_now = snap, snap[1]  # captured from the env as it is
        else:
            snap = root
        children, ahead, value, keys, depth_reached = [], [], total, set(), depth - t0
        for index, action in enumerate(actions):
            if nodes >= max_nodes:
                raise _Budget("nodes")
            if seconds is not None and time.monotonic() - started > seconds:
                raise _Budget("seconds")
            if held > max_mb * 1024 * 1024:
                raise _Budget("memory")
            restore(snap)
            try:
                out = host.op_step(action, want_hash=False)
            except Failure as f:
                raise Failure(f.kind, f"{f.detail} (after"
                                      f" {_path(parents, node, actions) + [action]})", f.where) from None
            except Exception as e:  # noqa: BLE001 - env code failed mid-search
                raise Failure("exception", f"{type(e).__name__}: {e} (after "
                              f"{_path(parents, node, actions) + [action]})", where()) from None
            nodes += 1
            parents.append((node, index))
            child = len(parents) - 1
            reached = total + out["reward"]
            value = max(value, reached)
            if out["reward"] > EPS:
                paid_most = max(paid_most, out["reward"])
                paid_went_on = paid_went_on or not (out["terminated"] or depth + 1 >= horizon)
            if bound is not None:
                refuted = _refutes(bound, out["reward"], out["terminated"] or depth + 1 >= horizon, reached,
                                   start_bound)
                if refuted is not None:
                    refuted += f" (after {_path(parents, node, actions) + [action]})"
                    bound, start_bound = None, None
            if reached > best + EPS:
                best, best_node, best_at = reached, child, nodes
            if stop_at is not None and reached_at is None and best >= stop_at - 1e-6:
                reached_at, target_at, target_depth = depth, nodes, depth + 1 - t0
            if start_bound is not None and best >= start_bound - 1e-6:
                raise _Budget("upper_bound")
            if out["terminated"]:
                keys.add(("end", _key(host, counters, out["t"] if time_in_key else None, None)))
                if goals and out["reward"] <= EPS:  # an end that pays nothing is no goal to steer to
                    state = getattr(host.env, "_state", None)
                    goals = [g for g in goals if _mismatch(_at(state, g[0]), _at(state, g[1])) != 0]
                continue
            rng = rngs.state()
            if rngs.same(rng, root[1]):
                rng, rng_now = None, root[1]
            key = _key(host, counters, out["t"] if time_in_key else None, rng)
            keys.add(key)
            # A dive goes on through states the table already holds (its own set of states stops it
            # going round in circles); what is new to the table is queued for best-first as well.
            onward = diving and depth + 1 < horizon and key not in dive_seen
            if onward:
                dive_seen.add(key)
            if _dominated(seen, key, depth + 1, reached) or depth + 1 >= horizon:
                if onward:  # recorded, never queued: the dive may still step on from it
                    state = getattr(host.env, "_state", None)
                    ahead.append((child, reached, len(_fresh(dive_atoms, state, counters)), _distance(state, goals),
                                  None))
                continue  # (at the cap: recorded, never expanded: the episode ends there)
            if hopeless(reached, depth + 1):
                pruned += 1
                continue
            state = getattr(host.env, "_state", None)
            novel = order == "best" and _novel(atoms, state, counters)
            far = _distance(state, goals)
            children.append((child, reached, far, novel))
            if onward:
                ahead.append((child, reached, len(_fresh(dive_atoms, state, counters)), far, True))
        expanded, successors = expanded + 1, successors + len(keys)
        if children:
            pending[node] = [len(children), _snapshot_bytes(snap, root)]
            held += pending[node][1]
        for child, reached, far, novel in children:
            rank = (
                (depth + 1,)
                if order == "breadth"
                else (-round(value, 9), depth + 1 + 2 * far if goals else 0, 0 if novel else 1)
            )
            entry = (rank, sequence, child, snap, reached, depth + 1)
            heapq.heappush(frontier, entry)
            if dives:
                queued[child] = entry
            sequence += 1
        # What a dive may step on from: (its frontier entry, or one made for the dive only; new atoms; distance)
        return [(queued[c] if on_frontier else ((), -1, c, snap, reached, depth + 1), fresh, far)
                for c, reached, fresh, far, on_frontier in ahead]

    def pop(entry: tuple) -> bool:
        """Take a node off the frontier (its parent's snapshot no longer held for it); whether it is
        still to be expanded (not taken over by a dive, not pruned since it was queued)."""
        nonlocal held, pruned
        _, _, node, parent_snap, total, depth = entry
        if parent_snap is None:
            return True
        count = pending[parents[node][0]]
        count[0] -= 1
        if count[0] == 0:
            held -= count[1]
        if dives and queued.pop(node, None) is None:
            return False  # a dive expanded it
        if hopeless(total, depth):  # the best rose since it was queued
            pruned += 1
            return False
        return True

    def dive(width: int) -> None:
        """One beam dive from the root: layer after layer, expand the `width` children with the highest
        total, then the most scalars no state of this dive held before, then the nearest goal, then a
        seeded draw. A child it expands that waits on the frontier is taken off it."""
        nonlocal diving, held
        draw = random.Random(spent["dives"])
        spent["dives"] += 1
        dive_atoms.clear()
        dive_seen.clear()
        layer, diving, extra = [((), -1, 0, None, 0.0, t0)], True, 0
        try:
            while layer:
                ranked = []
                for _, _, node, parent_snap, total, depth in layer:
                    if reached_at is not None:
                        raise _Budget("bound")
                    for entry, fresh, far in expand(node, parent_snap, total, depth):
                        ranked.append(((-round(entry[4], 9), -fresh, far, draw.random()), entry))
                held -= extra
                ranked.sort(key=lambda r: r[0])
                layer = [entry for _, entry in ranked[:width]]
                for entry in layer:
                    queued.pop(entry[2], None)  # the heap skips it when it pops it
                # The snapshots only the dive's next layer holds (of children the frontier does not hold)
                only_here = {id(e[3]): e[3] for e in layer if e[1] == -1}
                extra = sum(_snapshot_bytes(snap, root) for snap in only_here.values())
                held += extra
        finally:
            diving = False
            held -= extra

    diving, dive_atoms, dive_seen, width = False, set(), set(), DIVE_WIDTH
    try:
        while frontier:
            if dives and best <= EPS and spent["best"] >= max(max_nodes // DIVE_SHARE, spent["dive"]) and frontier:
                before = nodes
                try:
                    dive(width)
                finally:
                    spent["dive"] += nodes - before
                width *= DIVE_GROWTH
            entry = heapq.heappop(frontier)
            if reached_at is not None and (order == "best" or entry[5] > reached_at):
                raise _Budget("bound")
            if not pop(entry):
                continue
            before = nodes
            expand(entry[2], entry[3], entry[4], entry[5])
            spent["best"] += nodes - before
        # Branches pruned by a bound a later step refuted were judged wrongly: not exhausted.
        exhausted = not (refuted and pruned)
        stopped = None if exhausted else "bound_refuted"
    except _Budget as budget:
        stopped, exhausted = str(budget), False
    proof = None
    if stopped == "upper_bound":
        proof = "upper_bound"
    elif exhausted and time_in_key:
        proof = "exhausted"
    witness, completion = _path(parents, best_node, actions), 0
    try:
        if stopped in ("nodes", "seconds", "memory", "bound"):
            best, witness, completion = _complete_greedily(host, root, actions, witness, best, horizon - t0)
    finally:
        host.snapshots.apply(root)
    return {"best_reward": best, "witness": witness, "nodes": nodes, "completion_steps": completion,
            "exhausted": exhausted, "stopped": stopped, "distinct_states": len(seen), "proof": proof,
            "bound_refuted": refuted, "pruned": pruned, "upper_bound": start_bound,
            "evidence": {"step_max": paid_most, "paying_steps_end": not paid_went_on, "steps": nodes},
            "best_at": best_at, "target_at": target_at, "target_depth": target_depth,
            "depth_reached": depth_reached, "expanded": expanded, "successors": successors,
            "dives": spent["dives"], "dive_nodes": spent["dive"],
            "counters": [".".join(map(str, p)) for p in counters], "seconds": round(time.monotonic() - started, 3)}


def _goals(goals: list | None, state) -> list[tuple]:
    """The end conditions `A == B` (pairs of dotted paths into `_state`) that name a part of the state."""
    out = []
    for pair in goals or []:
        if (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
                and _at(state, pair[0]) is not _MISSING and _at(state, pair[1]) is not _MISSING):
            out.append((pair[0], pair[1]))
    return out


def _at(state, path: str):
    """The value at a dotted path of the state, or _MISSING."""
    for part in path.split("."):
        if isinstance(state, dict) and part in state:
            state = state[part]
        else:
            return _MISSING
    return state


def _distance(state, goals: list[tuple]) -> int:
    """How far the state is from meeting the first end condition (in the DSL's order) still a goal:
    scalars that differ between its two sides. One at a time, so a second condition (a failure
    pattern next to the start) does not pull the search away from the first. 0 without goals (every
    state alike), so the order is then value and novelty only."""
    if not goals:
        return 0
    a, b = _at(state, goals[0][0]), _at(state, goals[0][1])
    moved = _displacement(a, b)
    return _mismatch(a, b) if moved is None else moved


def _displacement(a, b) -> int | None:
    """For two arrangements of the same distinct scalars (a grid and its target pattern): how far
    the scalars are from their places, the sum over scalars of the distance between their index
    paths (a sliding puzzle's Manhattan distance). None when the two are not such arrangements."""
    where_a, where_b = _places(a), _places(b)
    if where_a is None or where_b is None or where_a.keys() != where_b.keys() or len(where_a) < 2:
        return None
    return sum(sum(abs(i - j) for i, j in zip(where_a[v], where_b[v])) for v in where_a)


def _places(value, path: tuple = (), out: dict | None = None) -> dict | None:
    """{scalar: its index path} of a nested list whose scalars are distinct and hashable, else None."""
    out = {} if out is None else out
    if not isinstance(value, (list, tuple)) or len(path) > 4:
        return None
    for i, item in enumerate(value):
        if isinstance(item, (list, tuple)):
            if _places(item, path + (i,), out) is None:
                return None
        else:
            try:
                if item in out:
                    return None
            except TypeError:
                return None
            out[item] = path + (i,)
    return out


def _mismatch(a, b, depth: int = 0) -> int:
    """Scalars that differ between two nested values (a missing or extra item counts one)."""
    if depth > MAX_DEPTH:
        return 0 if a == b else 1
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return sum(_mismatch(x, y, depth + 1) for x, y in zip(a, b)) + abs(len(a) - len(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return sum(_mismatch(a[k], b[k], depth + 1) if k in a and k in b else 1 for k in set(a) | set(b))
    try:
        return 0 if a == b else 1
    except Exception:  # noqa: BLE001 - values env code compares oddly (arrays): unequal
        return 1


def _remake(host, parents: list[tuple[int, int]], node: int, parent_snap: tuple, actions: list[dict]) -> tuple:
    """A queued node's state, made again from its parent's snapshot (the caller restored it) by
    stepping its action (the step it was reached by; not a new node). Returns its snapshot."""
    try:
        host.op_step(actions[parents[node][1]], want_hash=False)
    except Exception as e:  # noqa: BLE001 - the same step succeeded before: the env is not repeatable
        raise Failure("exception", f"{type(e).__name__}: {e} (stepping {_path(parents, node, actions)} again, "
                      f"which ran before from the same snapshot)", where()) from None
    return host.snapshots.capture(like=parent_snap)


def _refutes(bound: dict, reward: float, ended: bool, total: float, start_bound: float) -> str | None:
    """How one step refutes the DSL's reward bound (None when it does not)."""
    if not any(abs(reward - v) <= 1e-9 for v in [0.0, *bound["values"]]):
        return f"a step paid {reward:g}, none of the declared reward values {sorted(set(bound['values']))}"
    if bound.get("once") and reward > 0 and not ended:
        return f"a step paid {reward:g} and the episode went on (it could be paid again)"
    if total > start_bound + 1e-6:
        return f"an episode scored {total:g}, above the declared bound {start_bound:g}"
    return None


def _novel(atoms: set, state, counters: list) -> bool:
    """Whether `state` holds a (path, value) pair no state before it held; records its pairs: the
    scalars in nested dicts and lists (at most MAX_ATOMS of them, MAX_DEPTH down), `counters` left out."""
    skip = set(counters)
    new = False
    count = 0

    def walk(value, path: tuple, depth: int) -> None:
        nonlocal new, count
        if count > MAX_ATOMS or depth > MAX_DEPTH:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                if path + (k,) not in skip:
                    walk(v, path + (k,), depth + 1)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, path + (i,), depth + 1)
        else:
            count += 1
            try:
                hash(value)
            except TypeError:
                value = repr(value)
            atom = (path, value)
            if atom not in atoms:
                atoms.add(atom)
                new = True

    walk(state, (), 0)
    return new


def _fresh(atoms: set, state, counters: list) -> list:
    """The atoms of `state` not in `atoms` (recorded there): as `_novel`'s pairs, but a short list of
    scalars (a position, MAX_RUN at most) is one atom, so a piece standing on a new square is new even
    when each of its coordinates was seen before."""
    skip, new, count = set(counters), [], 0

    def walk(value, path: tuple, depth: int) -> None:
        nonlocal count
        if count > MAX_ATOMS or depth > MAX_DEPTH:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                if path + (k,) not in skip:
                    walk(v, path + (k,), depth + 1)
            return
        if isinstance(value, (list, tuple)) and not (
                len(value) <= MAX_RUN and all(isinstance(v, (int, float, str, bool)) for v in value)):
            for i, v in enumerate(value):
                walk(v, path + (i,), depth + 1)
            return
        count += 1
        if isinstance(value, (list, tuple)):
            value = ("run",) + tuple(value)
        try:
            hash(value)
        except TypeError:
            value = repr(value)
        atom = (path, value)
        if atom not in atoms:
            atoms.add(atom)
            new.append(atom)

    walk(state, (), 0)
    return new


def _dominated(seen: dict, key, depth: int, total: float) -> bool:
    """Whether `key` was reached at no later depth with no less reward; records it when not."""
    entries = seen.get(key)
    if entries is None:
        seen[key] = [(depth, total)]
        return False
    for d, t in entries:
        if d <= depth and t >= total - EPS:
            return True
    entries[:] = [(d, t) for d, t in entries if not (depth <= d and total >= t - EPS)] + [(depth, total)]
    return False


def _key(host, counters: list, t, rng) -> tuple:
    """A node's transposition key: a digest of its state (without the step counters), time, RNG."""
    state = getattr(host.env, "_state", None)
    saved = [_set(state, path, 0) for path in counters]
    try:
        digest = _digest(state)
    finally:
        for path, value in zip(counters, saved):
            _set(state, path, value)
    return digest, t, None if rng is None else rngs.key(rng)


def _digest(state) -> bytes:
    """A 128-bit digest of a state's canonical JSON (keys sorted: equal states digest equal)."""
    try:
        text = json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):  # keys json cannot sort (tuples, mixed types), deep nesting
        return b"h:" + state_hash(state).encode()
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _step_counters(host, root: tuple, actions: list[dict], steps: int) -> list[tuple]:
    """Paths of the integers in `_state` that count steps: one more after every action (steps
    taken), or one less (steps remaining). Every action is tried from the root, then one walk
    (the actions in turn, up to `steps` steps or the episode's end) must move each counter by the
    same one at every step: a countdown that starts over (a tide rising every 5 steps) is no clock."""
    host.snapshots.apply(root)
    before = dict(_integers(getattr(host.env, "_state", None)))
    if not before:
        return []
    counters = {p: None for p in before}  # path -> its change per step, +1 or -1 (None: not seen yet)

    def moved(previous: dict) -> dict:
        after = dict(_integers(getattr(host.env, "_state", None)))
        change = {p: after[p] - previous[p] for p in counters if p in after}
        return {p: m for p, m in change.items() if m in (1, -1) and counters[p] in (None, m)}, after

    try:
        for action in actions:
            host.snapshots.apply(root)
            try:
                host.op_step(action, want_hash=False)
            except Exception:  # noqa: BLE001 - the search meets it again and reports it
                return []
            counters, _ = moved(before)
            if not counters:
                return []
        host.snapshots.apply(root)
        previous = before
        for step in range(steps):
            try:
                out = host.op_step(actions[step % len(actions)], want_hash=False)
            except Exception:  # noqa: BLE001 - as above
                return []
            counters, previous = moved(previous)
            if not counters or out["terminated"]:
                break
    finally:
        host.snapshots.apply(root)
    return sorted(counters, key=str)


def _integers(value, path: tuple = (), depth: int = 0):
    """(path, value) of every int (not bool) in nested dicts, up to a few levels down."""
    if isinstance(value, dict) and depth < 4:
        for k, v in value.items():
            if isinstance(v, int) and not isinstance(v, bool):
                yield path + (k,), v
            elif isinstance(v, dict):
                yield from _integers(v, path + (k,), depth + 1)


def _set(state, path: tuple, value):
    """Set the int at `path` of `state` (when the state still has it); return what it held."""
    try:
        for k in path[:-1]:
            state = state[k]
        old = state[path[-1]]
    except (KeyError, TypeError, IndexError):
        return _MISSING
    if value is not _MISSING:
        state[path[-1]] = value
    return old


_MISSING = object()


def _complete_greedily(host, root: tuple, actions: list[dict], witness: list[dict], best: float,
                       steps_left: int) -> tuple[float, list[dict], int]:
    """After a budget cut the search: continue its best path to the episode's end, each step the
    action paying most at once. Rewards that accrue step by step (a cut search stops short of
    them) are then collected. Returns the better of the two paths and the steps it cost."""
    host.snapshots.apply(root)
    total, done = 0.0, False
    for action in witness:
        out = host.op_step(action, want_hash=False)
        total, done = total + out["reward"], out["terminated"]
    path, cost = list(witness), len(witness)
    while not done and len(path) < steps_left:
        here = host.snapshots.capture()
        choice = None
        for action in actions:
            host.snapshots.apply(here)
            out = host.op_step(action, want_hash=False)
            cost += 1
            if choice is None or out["reward"] > choice[1]:
                choice = (action, out["reward"])
        host.snapshots.apply(here)
        out = host.op_step(choice[0], want_hash=False)
        cost += 1
        total, done = total + out["reward"], out["terminated"]
        path.append(choice[0])
        if total > best:
            best, witness = total, list(path)
    return best, witness, cost


class _Budget(Exception):
    """The search ran out of nodes, time or memory, or met its target or bound."""


def _snapshot_bytes(snapshot: tuple, root: tuple) -> int:
    """About what a snapshot holds: its pickle, or a guess for deep copies, plus an unshared RNG state."""
    attrs, rng = snapshot
    return (len(attrs) if isinstance(attrs, bytes) else 4096) + (0 if rng is root[1] else 20_000)


def _path(parents: list[tuple[int, int]], node: int, actions: list[dict]) -> list[dict]:
    path = []
    while node > 0:
        node, index = parents[node]
        path.append(actions[index])
    return path[::-1]
