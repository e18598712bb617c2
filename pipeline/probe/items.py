"""Probe items: the data of one derived test, its JSONL form, and how an answer is scored.

Every item holds what is needed to pose it (observation texts, actions, the instruction the agent
reads) and its answer key (the correct candidate, the planner's plan, t*). Plan items are scored by
executing the agent's plan in the environment (`env_dir`, `skin`); the others need no environment.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pipeline import records as files

KINDS = ("predict", "plan", "change")


@dataclass
class Start:
    """Where an item begins: reset `level` with `seed`, then play `prefix`."""

    level: str
    seed: int = 0
    prefix: list[dict] = field(default_factory=list)


@dataclass
class Item:
    id: str
    env: str  # the env folder's name
    env_dir: str  # the folder the item was made from (plan items execute there)
    skin: str | None  # skins/<skin>.py rendered the observations; None: the env's own skin
    instruction: str  # agent_instruction.txt, as the agent reads it
    start: Start

    kind = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, **dataclasses.asdict(self)}


@dataclass
class PredictItem(Item):
    """Given `observation`, after `actions` (k of them), which candidate is the next observation?"""

    observation: str = ""
    actions: list[dict] = field(default_factory=list)
    k: int = 1
    candidates: list[str] = field(default_factory=list)
    answer: int = 0  # index of the true observation in candidates
    sources: list[str] = field(
        default_factory=list
    )  # per candidate: truth | counterfactual_action | counterfactual_state
    truth_samples: int = 1  # the truth was rendered this many times (different RNG states) and was always the same

    kind = "predict"


@dataclass
class PlanItem(Item):
    """From `observation`, reach a state whose semantic observation has `target` (field -> value)."""

    observation: str = ""
    target: dict[str, Any] = field(default_factory=dict)
    target_text: str = ""  # the target as the agent reads it
    target_observation: str = ""  # an observation (rendered) that meets the target
    max_length: int = 0  # steps left in the episode
    planner_length: int = 0
    planner_plan: list[dict] = field(default_factory=list)
    action_choices: list[dict] = field(default_factory=list)  # the planner's (and random agent's) actions
    random_success: float = 0.0  # share of random plans of planner_length that reach the target
    random_samples: int = 0

    kind = "plan"


@dataclass
class ChangeItem(Item):
    """The agent watches `actions` played in a changed copy of the env (`observations`, T + 1 of them)
    and says at which step the first observation the original rules could not produce appeared."""

    # kind, description, parameters; "spec" is what pipeline.probe.variants selects (swap, state_delta),
    # a config_constant's path and "to" are written into a private copy's config.yaml
    mutation: dict[str, Any] = field(default_factory=dict)
    actions: list[dict] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # observations[t] after t actions, in the changed env
    t_star: int = 0  # first step whose observation differs from every one the original env produces
    original_at_t_star: str = ""  # what the original env showed at t*, for a reader

    kind = "change"


_BY_KIND = {cls.kind: cls for cls in (PredictItem, PlanItem, ChangeItem)}


def from_dict(data: dict) -> Item:
    kind = data.get("kind")
    if kind not in _BY_KIND:
        raise ValueError(f"expected kind in {', '.join(KINDS)}, found {kind!r}")
    cls = _BY_KIND[kind]
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    values["start"] = Start(**values["start"])
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"{kind} item: expected fields {', '.join(missing)}, found none")
    return cls(**values)


def write_items(path: str | Path, items: Iterable[Item]) -> int:
    """Write items as JSONL (atomically); returns how many."""
    lines = [json.dumps(files.stamp("probe_item", item.to_dict()), sort_keys=True) + "\n" for item in items]
    files.write_text(path, "".join(lines))
    return len(lines)


def read_items(path: str | Path) -> list[Item]:
    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(from_dict(files.check(json.loads(line), "probe_item", f"{path}:{number}")))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}:{number}: {e}") from None
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
