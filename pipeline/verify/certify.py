"""Stage 2, levels: the certified max reward of one level, and level_max_rewards.json.

Max reward per level, from two sources (both recorded in level_max_rewards.json):
  * the validator's analytic bound, `max_reward(state)` (may be absent);
  * search over snapshots in the worker (pipeline.planner.search). A first breadth-first pass
    merges equal states reached at different steps (fast: it finds deep witnesses); only
    when a claim needs the whole space searched (the search stays below the bound, scores
    nothing, or there is no bound) a second pass keeps states at different steps apart,
    which is sound even when the dynamics read the step counter, and only that pass can
    call the search exhaustive. Both stop after the layer where the bound is reached.
The search's witness is replayed from a fresh reset through ordinary steps; what the replay
scores is the search reward (a witness that scores differently rejects the environment).
The certified max reward is then:
  * search reward > bound: the bound is wrong; max = search reward, `corrected: true`;
  * search reward < bound and the search was exhaustive: no action sequence reaches the
    bound; max = search reward, `corrected: true`;
  * search reward < bound, not exhaustive: max = bound (unconfirmed; the notes say so);
  * search reward = bound: max = bound, confirmed by the witness;
  * no bound: max = search reward.
So no agent's normalized reward (total / max) exceeds 1 unless it beats both the validator and
the search; the reliability stage corrects the max again if a random episode ever does.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pipeline import records as files
from pipeline import layout, planner
from pipeline.planner import replay
from pipeline.sandbox import SandboxFailure
from pipeline.sandbox.client import EnvClient, Verdict
from pipeline.errors import Rejected
from pipeline.verify.context import Context, failure_text, located

EPS = 1e-6


@dataclass
class LevelMax:
    source: str  # "levels/level_01.yaml" or "seed:7"
    state_hash: str
    max_reward: float
    calculation_method: str
    validator_bound: float | None
    search_reward: float
    search_exhaustive: bool
    search_nodes: int
    witness: list = field(default_factory=list)
    corrected: bool = False
    notes: str = ""
    nothing_reward: float = 0.0
    unfit: str = ""  # why the level cannot be used; "" when it can
    proven_unsolvable: bool = False
    seed: int | None = None
    state: dict | str | None = None  # a generated level: its YAML text from the worker (types intact), or its state
    # "certified" (exhaustive search, or a validator bound a replayed witness reaches) or
    # "lower_bound" (a budget cut the search: the true max may be higher).
    certainty: str = "certified"
    best_seen: float = 0.0  # the highest total of any rollout seen on the level (search, no-op, random, ...)
    idle_scores_max: bool = False  # doing nothing scores the max: the reward pays for time, judged at reliability

    def entry(self) -> dict:
        """Its level_max_rewards.json entry."""
        out = {k: getattr(self, k) for k in (
            "max_reward", "calculation_method", "validator_bound", "search_reward", "search_exhaustive",
            "search_nodes", "witness", "corrected", "notes", "nothing_reward", "certainty", "best_seen")}
        if "/" in self.source:
            out["split"] = self.source.split("/")[0]
        if self.seed is not None:
            out["seed"] = self.seed
        return out


class Certifier:
    """Certifies levels on several workers at once (one search each), once per distinct state."""

    def __init__(self, ctx: Context, workers: list[EnvClient], figures: dict):
        self.ctx, self.figures = ctx, figures
        self.cache: dict[str, LevelMax] = {}
        self.free: queue.Queue = queue.Queue()
        for worker in workers:
            self.free.put(worker)
        self.pool = ThreadPoolExecutor(len(workers), thread_name_prefix="certify")
        self.lock = threading.Lock()

    def many(self, items: list[tuple[str, Verdict]]) -> list[LevelMax]:
        """[(source, validator verdict)] -> their certified max rewards, in order."""
        todo: dict[str, tuple[str, Verdict]] = {}
        for source, verdict in items:
            if verdict.state_hash not in self.cache:
                todo.setdefault(verdict.state_hash, (source, verdict))
        for digest, lm in zip(todo, self.pool.map(self._one, todo.values())):
            self.cache[digest] = lm
            self.figures["search_nodes"] += lm.search_nodes
        return [dataclasses.replace(self.cache[v.state_hash], source=s) for s, v in items]

    def _one(self, item: tuple[str, Verdict]) -> LevelMax:
        source, verdict = item
        worker = self.free.get()
        started = time.monotonic()
        try:
            return certify(self.ctx, worker, source, verdict.max_reward, verdict.state_hash)
        except SandboxFailure as f:
            raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the search for the max reward of {source} to "
                           f"run without failure, found {failure_text(f)}") from None
        finally:
            with self.lock:  # summed over the workers, which search at the same time
                self.figures["search_seconds"] = round(self.figures["search_seconds"] + time.monotonic() - started, 3)
            self.free.put(worker)


def certify(ctx: Context, worker: EnvClient, source: str, bound: float | None, digest: str = "") -> LevelMax:
    """The certified max reward of one level (the rules are in the module docstring)."""
    opts = ctx.options
    budget = dict(max_nodes=opts.search_nodes, seconds=opts.search_seconds, stop_at=bound)
    worker.reset(source)
    actions = planner.candidates(ctx.space, worker)
    result = worker.search(actions, time_in_key=False, **budget)
    nodes, exhaustive = result.nodes, False
    nothing = _nothing(ctx, worker, source)
    claim = ctx.claims.get(source.rsplit("/", 1)[-1].removesuffix(".yaml")) if "/" in source else None
    if bound is None or result.best_reward < bound - EPS or result.best_reward <= nothing + EPS or (
            claim is not None and result.best_reward < claim - EPS):
        worker.reset(source)
        if claim is not None:  # a shipped claim above what was found: search until it is reached or refuted
            budget["stop_at"] = max(claim, bound if bound is not None else claim)
        keyed = worker.search(actions, time_in_key=True, **budget)
        # Exhaustive over the candidate actions; over the env's action space only when those are all of it.
        nodes, exhaustive = nodes + keyed.nodes, keyed.exhausted and ctx.candidates_complete
        if keyed.best_reward > result.best_reward + EPS:
            result = keyed
    worker.reset(source)
    achieved, _, steps = replay(worker, result.witness)
    if abs(achieved - result.best_reward) > EPS or steps != len(result.witness):
        raise Rejected(f"{source}: expected the search's witness ({len(result.witness)} actions) to score "
                       f"{result.best_reward:g} again when replayed from a fresh reset, found {achieved:g} after "
                       f"{steps} step(s): the environment does not behave the same after a snapshot is restored "
                       f"(state kept outside _state and the env's attributes, or another random source?)")
    lm = LevelMax(source, digest, achieved, "", bound, achieved, exhaustive, nodes, list(result.witness),
                  nothing_reward=nothing)
    searched = f"{'exhaustive ' if exhaustive else ''}search over {nodes} nodes"
    if bound is None:
        lm.calculation_method = "search_exhaustive" if exhaustive else "search_witness"
        lm.notes = f"no validator bound; the replayed witness of the {searched} scores {achieved:g}"
    elif achieved > bound + EPS:
        lm.calculation_method, lm.corrected = "search_witness", True
        lm.notes = f"validator bound {bound:g} is below what the replayed search witness scores ({achieved:g}); corrected"
    elif achieved < bound - EPS and exhaustive:
        lm.calculation_method, lm.corrected = "search_exhaustive", True
        lm.notes = f"validator bound {bound:g} is above what any action sequence scores ({searched}); corrected"
    elif achieved < bound - EPS:
        lm.max_reward, lm.calculation_method = bound, "validator_analytic"
        lm.notes = f"validator bound kept, unconfirmed: the {searched} (budget spent) reached {achieved:g}"
    else:
        lm.max_reward, lm.calculation_method = bound, "validator_analytic+search_witness"
        lm.notes = f"validator bound confirmed: the replayed witness of the {searched} scores it"
    lm.best_seen = max(achieved, nothing)
    if nothing > lm.max_reward + EPS:
        # No max may sit below a rollout envforge has seen (a budget-cut search, a wrong bound).
        lm.max_reward, lm.corrected, lm.calculation_method = nothing, True, "no_op_rollout"
        lm.witness = [ctx.no_op] * ctx.max_steps
        lm.notes += f"; doing nothing scores {nothing:g}, more than that: max raised to it"
    if lm.calculation_method in ("search_witness", "no_op_rollout") and not exhaustive:
        lm.certainty = "lower_bound"
        lm.notes += " (a lower bound: the search budget ran out)"
    elif lm.calculation_method == "validator_analytic":
        lm.certainty = "unconfirmed_bound"
    if achieved <= nothing + EPS and nothing <= EPS and exhaustive:
        lm.unfit = (f"search achieves nothing: the best of {searched} scores {achieved:g}, no more than doing "
                    f"nothing ({nothing:g})")
        lm.proven_unsolvable = True
    elif achieved <= nothing + EPS and nothing <= EPS:
        # Only envforge's search is narrow here (its budget, its candidate actions): not the level's flaw.
        lm.certainty = "unknown"
        lm.notes += f"; the {searched} (budget spent) found no reward: the max is unconfirmed"
    elif nothing >= lm.max_reward - EPS:
        # A reward flaw, not the level's: reliability rejects it with the reason.
        lm.idle_scores_max = True
    return lm


def _nothing(ctx: Context, worker: EnvClient, source: str) -> float:
    """What doing nothing scores: the no-op action until the episode ends; 0 without a no-op."""
    if ctx.no_op is None:
        return 0.0
    worker.reset(source)
    total, _, _ = replay(worker, [ctx.no_op] * ctx.max_steps)
    return total


def write_max_rewards(ctx: Context, levels: list[LevelMax]) -> None:
    """level_max_rewards.json in the AutoEnv C.1 shape, plus our per-level certification fields."""
    values = [lm.max_reward for lm in levels]
    methods = sorted({lm.calculation_method for lm in levels})
    data = {
        "environment_id": ctx.env.name,
        "calculation_timestamp": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "levels": {layout.level_key(lm.source): lm.entry() for lm in levels},
        "summary": {
            "total_levels": len(values),
            "average_max_reward": round(sum(values) / len(values), 4),
            "min_max_reward": min(values),
            "max_max_reward": max(values),
            "corrected_levels": sum(lm.corrected for lm in levels),
            "methodology": "envforge verify: validator bound and breadth-first search over snapshots with a "
                           "replayed witness; methods used: " + ", ".join(methods),
        },
    }
    files.write_json(ctx.env.file(layout.LEVEL_MAX_REWARDS), "level_max_rewards", data)
