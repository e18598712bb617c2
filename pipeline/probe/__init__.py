"""Derived world-model tests: items made from an accepted environment, and scoring agents on them.

    items.py        the item dataclasses, JSONL I/O, scoring functions (shared with evaluate)
    predict.py      next observation after k actions, among counterfactual distractors (WM-ABench, WorldTest)
    plan.py         reach a target, checked by execution; efficiency against the planner (BabyBench)
    change.py       when did the changed dynamics first show? scored by lateness (WorldTest)
    variants.py     private copies whose env class swaps actions, changes a constant or pays a goal
    variant_env.py  that env class (runs in the sandbox)
    session.py      the env, a worker and playing sequences, shared by the makers
    agents.py       random, oracle and model answerers
    score.py        run_probes / score_items: accuracy per kind and k, random baselines
"""
from __future__ import annotations

from dataclasses import dataclass, field

from envforge.pipeline.probe.change import ChangeOptions, make_change
from envforge.pipeline.probe.items import KINDS, ChangeItem, Item, PlanItem, PredictItem, read_items, write_items
from envforge.pipeline.probe.plan import PlanOptions, make_plan
from envforge.pipeline.probe.predict import PredictOptions, make_predict
from envforge.pipeline.probe.score import ProbeReport, run_probes, score_items
from envforge.pipeline.probe.session import open_env, open_session
from envforge.pipeline.sandbox import SandboxLimits


@dataclass
class ProbeItems:
    items: list[Item] = field(default_factory=list)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> reason -> count


def make_probes(env_dir: str, kinds: tuple[str, ...], n: int, seed: int = 0, skin: str | None = None,
                predict: PredictOptions = PredictOptions(), plan: PlanOptions = PlanOptions(),
                change: ChangeOptions = ChangeOptions(), limits: SandboxLimits | None = None) -> ProbeItems:
    """`n` items of each kind in `kinds` from one environment (fewer when too many are dropped)."""
    spec = open_env(env_dir, skin)
    made = ProbeItems()
    for kind in kinds:
        session = open_session(spec, skin, seed, limits)
        try:
            if kind == "predict":
                made.items += make_predict(session, n, predict)
            elif kind == "plan":
                made.items += make_plan(session, n, plan)
            elif kind == "change":
                made.items += make_change(session, n, change)
            else:
                raise ValueError(f"expected a kind in {', '.join(KINDS)}, found {kind!r}")
        finally:
            session.worker.close()
        made.dropped[kind] = dict(session.dropped)
    return made


__all__ = ["ChangeItem", "ChangeOptions", "Item", "KINDS", "ProbeItems", "PlanItem", "PlanOptions", "PredictItem",
           "PredictOptions", "ProbeReport", "make_probes", "read_items", "run_probes", "score_items", "write_items"]
