"""Stochastic environments: randomness drawn during `step`, and what it does to a level's verdicts.

Search plays each level from one seed of the random numbers (the worker seeds them at reset), so
for an environment whose transitions draw random numbers, "no action sequence scores" holds for
that one chance outcome only, and the best total found is one lucky or unlucky draw. `probe`
finds out whether steps draw random numbers (the global RNGs' state, or a generator the env
holds, changes across a step). For such an environment the levels stage (levels.py) never calls
a level unsolvable on search alone, and the max reward of a level file is an *expectation
estimate* (`estimate_max`): the best mean total of the policies played over many chance seeds,
  * the replanning agent (`replanning`): episodes over chance seeds 1, 2, ... until REPLAN_FACTOR
    times the level's search budget is spent (from MIN_EPISODES to EPISODES episodes); each
    decision searches from the real state in up to PLAN_TRIES imagined chance outcomes (the
    snapshot restored and reseeded, so no plan sees the real draws; PLAN_NODES nodes at most, and
    none once SETTLED plans from that state and step scored), then takes the first action the
    scoring plans from that state and step (this episode's and earlier ones') most agree on, a
    plan voting only where its first action changes the state in its outcome, else its previous
    action again;
  * the certifying search's witness replayed under ESTIMATE_SEEDS seeds;
  * every constant policy (reliability's) and doing nothing, under ESTIMATE_SEEDS seeds,
with its 95 % confidence interval, labelled an estimate and a lower bound (a policy's mean: the
best policy's expectation is no lower, within the interval), so no max estimate sits below what a
trivial policy was seen to score on average. "unknown" only when no episode scored at all; the
figures say how many were played and over which seeds. Everything is seeded and counted in
nodes and episodes, never wall-clock (the search's safety stop labels what it cuts).
"""
from __future__ import annotations

import json
import math
import random
import statistics

from envforge.pipeline import planner
from envforge.pipeline.levelmax import EPS, SEARCH_SECONDS
from envforge.pipeline.planner import replay
from envforge.pipeline.sandbox.outside.client import EnvClient, Level

PROBE_LEVELS = 3  # levels probed for randomness drawn during step
PROBE_STEPS = 10  # random valid actions per probed level
ESTIMATE_SEEDS = 10  # seeds a fixed action sequence (the witness, a constant policy) is replayed under
EPISODES = 40  # replanning episodes per level at most (chance seeds 1..EPISODES) ...
MIN_EPISODES = 8  # ... and at least
REPLAN_FACTOR = 1  # the replanning agent's search nodes per level: this many times the level's search budget
PLAN_TRIES = 8  # imagined chance outcomes a decision searches at most (their scoring plans vote)
PLAN_NODES = 160  # search nodes per decision at most (a failed search of a small space, and then some)
SETTLED = 5  # scoring plans from a state and step after which its decision is not searched again


def probe(ctx, worker: EnvClient, levels: list[Level]) -> dict | None:
    """Where a step first drew random numbers ({level, step, action}), or None when none did."""
    rng = random.Random(ctx.options.seed + 11)
    for level in levels[:PROBE_LEVELS]:
        worker.reset(level)
        for step in range(1, PROBE_STEPS + 1):
            action = ctx.space.sample(rng)
            out = worker.step(action, check_rng=True)
            if out.rng_drawn:
                return {"level": str(level), "step": step, "action": action}
            if out.done:
                break
    return None


def estimate(worker: EnvClient, level: str, witness: list[dict], seeds: int = ESTIMATE_SEEDS) -> dict:
    """A fixed action sequence's total replayed from `seeds` seeds of the level (`summary`)."""
    totals = []
    for seed in range(1, seeds + 1):
        worker.reset(level, seed=seed)
        totals.append(replay(worker, witness)[0])
    return summary(totals)


def summary(totals: list[float]) -> dict:
    """Mean of episode totals over chance seeds 1..len(totals), its 95 % half-width, range, how many scored."""
    mean = statistics.fmean(totals)
    half = 1.96 * statistics.stdev(totals) / math.sqrt(len(totals)) if len(totals) > 1 else 0.0
    return {"mean": round(mean, 9), "ci95": [round(mean - half, 9), round(mean + half, 9)], "seeds": len(totals),
            "min": round(min(totals), 9), "max": round(max(totals), 9),
            "scored": sum(t > EPS for t in totals)}


def budget(search_nodes: int) -> int:
    """The replanning agent's search nodes on a level with this search budget."""
    return REPLAN_FACTOR * search_nodes


def replanning(worker: EnvClient, spec, level: str, nodes: int, seed: int) -> tuple[dict, list]:
    """The replanning agent's totals over chance seeds 1, 2, ... (`summary`, plus the search nodes
    spent and whether the safety stop cut a search) and the actions of its best episode: episodes
    until `nodes` search nodes are spent (at least MIN_EPISODES, at most EPISODES)."""
    totals, best, spent, cut = [], (-math.inf, []), 0, False
    tally: dict[tuple, dict[str, list]] = {}  # (state, step) -> first action -> [plans, their total reward]
    while len(totals) < EPISODES and (len(totals) < MIN_EPISODES or spent < nodes):
        episode = len(totals) + 1
        imagined = random.Random(seed * 1_000_003 + episode)  # the plans' chance outcomes, never the real ones
        worker.reset(level, seed=episode)
        total, played = 0.0, []
        while True:
            here = worker.snapshot()
            state = (worker.restore(here), worker.steps)
            actions = planner.candidates(spec.actions, worker)
            votes, used = tally.setdefault(state, {}), 0
            for _ in range(PLAN_TRIES):
                if used >= PLAN_NODES or sum(n for n, _ in votes.values()) >= SETTLED:
                    break
                worker.restore(here, reseed=imagined.randrange(2**31))
                result = planner.search(worker, spec, actions=actions, max_nodes=PLAN_NODES - used,
                                        seconds=SEARCH_SECONDS)
                used, cut = used + result.nodes, cut or result.cut_by_clock
                # A plan votes for its first action only where that action changes the state in its
                # outcome: where the first draw makes every action alike (a slip), any one would do.
                if result.best_reward > EPS and result.witness and \
                        worker.step(result.witness[0]).state_hash != state[0]:
                    vote = votes.setdefault(json.dumps(result.witness[0], sort_keys=True), [0, 0.0])
                    vote[0], vote[1] = vote[0] + 1, vote[1] + result.best_reward
            worker.restore(here)
            worker.drop([here])
            spent += used
            if votes:  # the first action the scoring plans most agree on
                action = json.loads(max(votes, key=lambda a: votes[a][1]))
            elif played:  # no imagined outcome scores from here: go on as before
                action = played[-1]
            else:
                action = imagined.choice(actions)
            out = worker.step(action)
            total, played = total + out.reward, played + [action]
            if out.done:
                break
        totals.append(total)
        if total > best[0]:
            best = (total, played)
    return summary(totals) | {"plan_nodes": PLAN_NODES, "search_nodes": spent, "cut_by_clock": cut}, best[1]


def estimate_max(ctx, worker: EnvClient, lm, constants: list[tuple[str, dict]]) -> tuple[dict, list]:
    """A stochastic level's max estimate (module docstring): the best policy's summary, named
    (`policy`), with every policy's mean (`tried`) and the episodes played; and the best episode's
    actions of the replanning agent (a witness when the search over one chance outcome has none)."""
    spec = ctx.search.spec
    plans, played = replanning(worker, spec, lm.source, budget(ctx.options.search_nodes), ctx.options.seed)
    policies = [("the replanning agent", plans)]
    if lm.witness:
        policies.append(("the search witness", estimate(worker, lm.source, lm.witness)))
    for name, action in constants:
        policies.append((name, estimate(worker, lm.source, [action] * spec.max_steps)))
    name, best = policies[0]
    for other, found in policies[1:]:
        if found["mean"] > best["mean"] + EPS:
            name, best = other, found
    tried = {n: found["mean"] for n, found in policies}
    out = dict(best, policy=name, lower_bound=True, tried=tried, replanning=plans,
               episodes_tried=sum(found["seeds"] for _, found in policies),
               scored_episodes=sum(found["scored"] for _, found in policies))
    return out, played


def where(found: dict) -> str:
    action = found["action"]
    params = ", ".join(f"{k}={v!r}" for k, v in (action.get("params") or {}).items())
    return f"step {found['step']} ({action.get('action')}({params})) on {found['level']}"
