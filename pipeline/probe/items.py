"""Probe items: the data of one derived test, its JSONL form, and how an answer is scored.

Every item holds what is needed to pose it (observation texts, actions, the instruction the agent
reads) and its answer key (the correct candidate, the planner's plan, t*). Plan items are scored by
executing the agent's plan in the environment (`env_dir`, `skin`); the others need no environment.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterable

from envforge.pipeline import records as files
from envforge.pipeline.kinds import ChangeItem, PlanItem, PredictItem
from envforge.pipeline.kinds import ProbeItem as Item
from envforge.pipeline.kinds import ProbeStart as Start

# The items are the probe_item record kind (pipeline/kinds.py), a shape per kind.
KINDS = tuple(shape.TAG_VALUE for shape in (PredictItem, PlanItem, ChangeItem))
__all__ = ["KINDS", "ChangeItem", "Item", "PlanItem", "PredictItem", "Start", "read_items", "write_items"]


def write_items(path: str | Path, items: Iterable[Item]) -> int:
    """Write items as JSONL (atomically); returns how many."""
    lines = [json.dumps(files.stamp(Item.KIND, item.to_dict()), sort_keys=True) + "\n" for item in items]
    files.write_text(path, "".join(lines))
    return len(lines)


def read_items(path: str | Path) -> list[Item]:
    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}:{number}: {e}") from None
        items.append(Item.from_dict(files.check(data, Item.KIND, f"{path}:{number}"), f"{path}:{number}"))
    return items


# -- scoring --------------------------------------------------------------------------------

def score_predict(item: PredictItem, choice: int | None) -> float:
    return 1.0 if choice == item.answer else 0.0


def random_predict(item: PredictItem) -> float:
    """Expected score of a uniformly random candidate."""
    return 1.0 / len(item.candidates)


def score_plan(item: PlanItem, reached: bool, length: int) -> tuple[float, float]:
    """(success, efficiency): efficiency = planner length / agent length on success (BabyBench), else 0."""
    if not reached:
        return 0.0, 0.0
    return 1.0, (min(1.0, item.planner_length / length) if length else 1.0)


def score_change(t: int | None, t_star: int) -> float:
    """WorldTest / AutumnBench C.2: 0 before t* - 1, 1 at t* - 1 or t*, then 1.377 f(t) - 1.178
    with f(t) = 1 / (1 - (t / t*) exp(-t / t*)), falling from 1 towards 0.2 the later the
    detection; 0 when the agent never reports a change."""
    if t is None or t < t_star - 1:
        return 0.0
    if t <= t_star:
        return 1.0
    ratio = t / t_star
    return 1.377 / (1.0 - ratio * math.exp(-ratio)) - 1.178


def random_change(item: ChangeItem) -> float:
    """Expected score of reporting a uniformly random step among 1..T."""
    steps = range(1, len(item.actions) + 1)
    return sum(score_change(t, item.t_star) for t in steps) / len(steps)
