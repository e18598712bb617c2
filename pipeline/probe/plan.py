"""Plan items: from a level's start, reach a target the planner can reach; checked by execution.

A random walk from the start ends in a state; the target is the part of its semantic observation
that the walk changed (fields of omega, except the step counter and fields that changed on every
step of the walk, which are clocks, not goals). The planner (breadth-first search in the sandbox,
on a variant whose reward is 1 exactly when the target holds) finds the shortest plan; the item is
kept only when that plan, replayed through ordinary steps, meets the target. An agent's plan
succeeds when the observation after its last action meets the target; efficiency is planner length
over agent length (BabyBench). The random baseline is the share of random plans of the planner's
length that succeed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from envforge.pipeline import planner
from envforge.pipeline.probe.items import PlanItem, Start
from envforge.pipeline.probe.session import ProbeSession
from envforge.pipeline.probe.variant_env import meets
from envforge.pipeline.probe.variants import select, variant_worker


@dataclass(frozen=True)
class PlanOptions:
    min_walk: int = 4
    max_walk: int = 15
    search_nodes: int = 50_000
    search_seconds: float = 120.0  # a safety stop, not a budget: the search is counted in nodes
    random_samples: int = 30
    other_walks: int = 2  # walks of the same length that tell clocks from goals
    min_plan: int = 3  # targets nearer than this are dropped


def make_plan(session: ProbeSession, n: int, options: PlanOptions = PlanOptions()) -> list[PlanItem]:
    items: list[PlanItem] = []
    seen: set[str] = set()
    with variant_worker(session.spec.path) as goal_worker:
        attempts = 0
        while len(items) < n and attempts < 20 * n:
            attempts += 1
            item = _one(session, goal_worker, len(items), options, seen)
            if item is not None:
                items.append(item)
    return items


def _one(session: ProbeSession, goal_worker, number: int, o: PlanOptions, seen: set[str]) -> PlanItem | None:
    spec, rng = session.spec, session.rng
    start = Start(rng.choice(session.levels), 0, [])
    length = rng.randint(o.min_walk, o.max_walk)
    others = []
    for _ in range(o.other_walks):
        session.begin(start)
        others.append(session.play(session.random_actions(length))[-1].raw_obs)
    first = session.begin(start)
    walk = session.play(session.random_actions(length))
    if len(walk) < length or walk[-1].done:
        session.drop("the random walk ended the episode")
        return None
    target = target_of(first.raw_obs, [reply.raw_obs for reply in walk], others)
    key = json.dumps([start.level, target], sort_keys=True)
    if not target or key in seen:
        session.drop("the walk changed nothing new")
        return None
    seen.add(key)

    select(goal_worker, {"goal": target})
    goal_worker.reset(start.level, start.seed)
    choices = planner.candidates(spec.actions, goal_worker)
    # The goal variant pays 1.0 at the target, not the DSL's rewards: its goals steer, no DSL bound.
    found = planner.search(goal_worker, spec, actions=choices, max_nodes=o.search_nodes, seconds=o.search_seconds,
                           stop_at=1.0, bound=False)
    if found.best_reward < 1.0 and found.cut_by_clock:
        session.drop(f"the planner's search was cut by its {o.search_seconds:g}s safety stop (depends on load)")
        return None
    if found.best_reward < 1.0:
        session.drop("the planner did not reach the target within its node budget")
        return None
    if len(found.witness) < o.min_plan:
        session.drop(f"the target is fewer than {o.min_plan} steps away")
        return None
    if not reaches(session, start, found.witness, target):
        session.drop("the planner's plan does not reach the target when replayed")
        return None
    wins = sum(reaches(session, start, session.random_actions(len(found.witness)), target)
               for _ in range(o.random_samples))
    return PlanItem(**session.item_fields("plan", number, start), observation=first.observation,
                    target=target, target_text=describe_target(target), target_observation=walk[-1].observation,
                    max_length=spec.max_steps, planner_length=len(found.witness), planner_plan=found.witness,
                    action_choices=choices, random_success=wins / o.random_samples,
                    random_samples=o.random_samples)


def target_of(omega0: dict, walk: list[dict], others: list[dict]) -> dict:
    """The fields of the walk's last omega that differ from the start's, without clocks: the step
    counter, fields that changed on every step, and fields that other random walks of the same
    length ended with too (`others`: their last omegas), i.e. what time did, not the agent."""
    def text(value) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    last = walk[-1]
    clocks = {"t"}
    if len(walk) >= 3:
        history = [omega0] + walk
        clocks |= {k for k in last if all(text(a.get(k)) != text(b.get(k)) for a, b in zip(history, history[1:]))}
    if others:
        clocks |= {k for k in last if all(text(other.get(k)) == text(last[k]) for other in others)}
    return {k: v for k, v in last.items() if k not in clocks and text(v) != text(omega0.get(k))}


def describe_target(target: dict) -> str:
    lines = []
    for key, value in sorted(target.items()):
        if isinstance(value, list) and value and all(isinstance(r, str) for r in value):
            lines.append(f"{key}:\n" + "\n".join(f"    {row}" for row in value))
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines)


def reaches(session: ProbeSession, start: Start, plan: list[dict], target: dict, worker=None) -> bool:
    """Whether the observation after the plan's last action (or where the episode ended) meets the target."""
    first = session.begin(start, worker)
    replies = session.play(plan, worker)
    final = replies[-1] if replies else first
    return final is not None and meets(final.raw_obs, target)
