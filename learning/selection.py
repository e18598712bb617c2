"""Selection (AutoEnv §4.2, F_s): which candidates of the pool the next optimization starts from.

Pure functions over anything with `reward` (higher is better) and `cost` (lower is better);
candidates give their training reward and tokens per episode. Ties keep the pool's order, so
the older candidate wins: a rewrite must be strictly better to replace its parent.

    best(pool)              the candidate with the highest reward (ties: the cheaper, then the older)
    pareto(pool)            every candidate no other one dominates in (reward, cost)
    spread(front, k)        at most k of a front, evenly spaced from its best reward to its lowest cost
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar


class Scored(Protocol):
    @property
    def reward(self) -> float: ...

    @property
    def cost(self) -> float: ...


T = TypeVar("T", bound=Scored)


def best(pool: Sequence[T]) -> list[T]:
    if not pool:
        return []
    return [min(enumerate(pool), key=lambda ic: (-ic[1].reward, ic[1].cost, ic[0]))[1]]


def dominates(a: Scored, b: Scored) -> bool:
    """a is at least as good as b on both axes and better on one."""
    return a.reward >= b.reward and a.cost <= b.cost and (a.reward > b.reward or a.cost < b.cost)


def pareto(pool: Sequence[T]) -> list[T]:
    """The non-dominated candidates, highest reward first (equal points are all kept)."""
    front = [c for c in pool if not any(dominates(other, c) for other in pool)]
    order = {id(c): i for i, c in enumerate(pool)}
    return sorted(front, key=lambda c: (-c.reward, c.cost, order[id(c)]))


def spread(front: Sequence[T], k: int) -> list[T]:
    """k members of a front sorted by reward, evenly spaced along it, both ends included."""
    if k <= 0 or len(front) <= k:
        return list(front)
    if k == 1:
        return [front[0]]
    picks = sorted({round(i * (len(front) - 1) / (k - 1)) for i in range(k)})
    return [front[i] for i in picks]


# selection name -> (pool, at most k parents) -> parents. A new rule is a new entry here.
SELECTIONS: dict[str, Callable[[Sequence[T], int], list[T]]] = {
    "best": lambda pool, k: best(pool),
    "pareto": lambda pool, k: spread(pareto(pool), k),
}
