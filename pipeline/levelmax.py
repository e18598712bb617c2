"""The certified max reward of one level: what verify's levels stage (pipeline/verify/certify.py
pools it on its workers) and learn's training levels (through pipeline/levelfactory.py) both use.

Max reward per level, from these sources (all recorded in level_max_rewards.json):
  * the validator's analytic bound, `max_reward(state)` (may be absent), and a shipped claim:
    hypotheses the search tries to reach, never proofs;
  * the DSL's reward bound (`planner.reward_bound`: its declared step rewards, a binary one paid
    once, the step cap): an admissible reward-to-go bound, checked against every step the search
    takes and dropped on the first that breaks it; the search stops when it is met and prunes
    every branch it shows cannot beat the best (branch and bound);
  * the search over snapshots in the worker (pipeline/sandbox/inside/search.py), `--search-nodes` steps
    per level over all its passes: first best-first over states merged across steps (it finds
    deep witnesses; steered toward the DSL's `A == B` end conditions, `end_goals`); when that exhausts its space,
    breadth-first with the step in the key on
    what is left of the budget, which is sound even when the dynamics read the step counter:
    only that pass can call the search exhaustive. The actions it tries carry parameter values
    drawn from the level (pipeline/envfolder/values.py); with a numeric parameter not enumerated
    whole, the first pass gets 3/4 of the budget and, when it ends without a proof or reaching
    the claim, best-first runs again on the rest with those values refined around what its
    witness used (or the grid bisected); the better witness is kept, and the value sets tried
    are recorded (`values`, verification.json's levels figures `parameter_values`).
The max is *exact* only with a proof: every reachable state searched (or pruned by the bound), or
the DSL's bound met by the witness (`proof`). Otherwise it is the validator's bound met (not
proved), or a lower bound, with its gap to the DSL's bound while no step refuted it
(`upper_bound`), or unknown.
The search's witness is replayed from a fresh reset through ordinary steps; what the replay
scores is the search reward (a witness that scores differently rejects the environment).
The certified max reward is then:
  * search reward > bound: the bound is wrong; max = search reward, `corrected: true`;
  * search reward < bound and proved: no action sequence reaches the bound; max = search reward,
    `corrected: true`;
  * search reward < bound, not proved: max = bound (unconfirmed; the notes say so);
  * search reward = bound: max = bound, confirmed by the witness;
  * no bound: max = search reward.
A level certified only to be judged fit (`fit_only`: a generated level verify does not keep,
since the folder ships its own) stops searching as soon as a witness beats doing nothing, which
settles what is asked of it (fit, not proven unsolvable) exactly as the whole budget would: the
search up to then is the same, and without such a witness it runs the whole budget anyway. Its
max is a lower bound no one scores on, never reused for a level that is kept, unless the search
ended on a proof before its lowered target could stop it (then it is what the whole budget finds:
a shipped level equal to a generated one is not searched twice; see verify's `PooledCertifier._whole`).
So no agent's normalized reward (total / max) exceeds 1 unless it beats both the validator and
the search; the reliability stage corrects the max again if a random episode ever does. A level
whose search the `--search-seconds` safety stop cut is labelled (`cut_by_clock`): its figures
depend on machine load, which the node budget otherwise rules out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from envforge.pipeline import planner
from envforge.pipeline.envfolder import values as param_values
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import Rejected
from envforge.pipeline.kinds import DifficultyProfile, LevelMaxEntry, WitnessNotReplayed
from envforge.pipeline.planner import replay
from envforge.pipeline.sandbox.outside.client import EnvClient

SEARCH_NODES = 20_000  # search budget per level (all its passes), in environment steps: verify's and learn's default
REFINE_SHARE = 4  # with a numeric parameter to refine, 1/4 of the node budget is kept for the refined pass
SEARCH_SECONDS = 300.0  # wall-clock safety stop per search, not a budget (a level it cuts is labelled)
# A parameterless action with one of these names is the "do nothing" action of a level.
NO_OP_NAMES = ("wait", "noop", "no_op", "stay", "pass", "idle", "skip", "nothing", "rest")


@dataclass(frozen=True)
class Search:
    """What certifying a level takes: the environment, the search budget per level and its safety
    stop, and the claims the search tries to reach (a shipped level_max_rewards.json: level name
    without `.yaml` -> claimed max reward; never a proof)."""

    spec: EnvSpec
    nodes: int = SEARCH_NODES
    seconds: float = SEARCH_SECONDS
    claims: dict = field(default_factory=dict)


def no_op(spec: EnvSpec) -> dict | None:
    """The environment's "do nothing" action (NO_OP_NAMES, no required parameter), or None."""
    for action in spec.actions:
        if action.name.lower() in NO_OP_NAMES and not [p for p in action.params if not p.optional]:
            return {"action": action.name, "params": {}}
    return None


EPS = 1e-6
FIT_MARGIN = 3 * EPS  # a fit-only search stops at a witness scoring this above doing nothing


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
    expectation: dict | None = None  # a stochastic level: the best policy's mean over chance seeds (verify/chance.py)
    # Why max_reward is exact: "exhausted" (every reachable state searched) or "upper_bound" (the
    # DSL's declared binary reward met); "" when it is not proved (validator bound met or a lower bound).
    proof: str = ""
    upper_bound: float | None = None  # the best proved or declared upper bound, when there is one
    cut_by_clock: bool = False  # the --search-seconds safety stop cut a search: figures depend on load
    stopped_at_claim: bool = False  # the search stopped on reaching the validator's or shipped claim (no proof)
    bound_refuted: str = ""  # how a step broke the DSL's reward bound (then there is no upper bound from it)
    # A lower bound with no upper bound: what the search's steps suggest (`evidence_bound`), never a proof
    evidence_bound: float | None = None
    evidence: str = ""  # how evidence_bound was derived, in words
    # "action.parameter" -> {"values": what the search tried, "refined": what refinement added} (envfolder/values.py)
    values: dict | None = None
    nodes_to_best: int = 0  # search nodes (over its passes) stepped when the best it kept was first reached
    difficulty: DifficultyProfile | None = None  # how hard the level is (pipeline/difficulty.py; reliability)

    @property
    def exact(self) -> bool:
        return bool(self.proof)

    def entry(self) -> LevelMaxEntry:
        """Its level_max_rewards.json entry."""
        return LevelMaxEntry(**{k: tidy(getattr(self, k)) for k in (
            "max_reward", "calculation_method", "validator_bound", "search_reward", "search_exhaustive",
            "search_nodes", "witness", "corrected", "notes", "nothing_reward", "certainty", "best_seen", "proof",
            "upper_bound", "cut_by_clock", "bound_refuted", "evidence_bound", "seed", "expectation", "difficulty")},
            exact=self.exact, split=self.source.split("/")[0] if "/" in self.source else None)


def scorable(lm: LevelMax) -> bool:
    """Whether a level's max reward may divide normalized scores: known (not "unknown") and positive."""
    return lm.certainty != "unknown" and lm.max_reward > EPS


def unscored_reason(lm: LevelMax) -> str:
    if lm.certainty == "unknown" and lm.expectation:
        return (f"max reward unknown (stochastic: no episode scored, {lm.expectation['episodes_tried']} played "
                f"over chance seeds)")
    if lm.certainty == "unknown":
        return f"max reward unknown (the search found no reward; {lm.max_reward:g} is unconfirmed)"
    return f"max reward {lm.max_reward:g}: nothing to divide by"


def tidy(value):
    """A reward total without float noise (a sum of 0.1s is 4.4, not 4.3999999999999995); anything else as is."""
    return round(value, 9) if isinstance(value, float) else value


def certify(search: Search, worker: EnvClient, source: str, bound: float | None, digest: str = "",
            fit_only: bool = False) -> LevelMax:
    """The certified max reward of one level (the rules are in the module docstring)."""
    claim = search.claims.get(source.rsplit("/", 1)[-1].removesuffix(".yaml")) if "/" in source else None
    target = max([v for v in (bound, claim) if v is not None], default=None)
    nothing = _nothing(search, worker, source)
    if fit_only:  # a witness scoring above doing nothing (and its EPS) settles fitness: stop there
        enough = nothing + FIT_MARGIN
        target = enough if target is None else min(target, enough)
    worker.reset(source)
    on_level, values = planner.level_values(search.spec.actions, worker)
    first_values, actions = values, on_level.candidates(values)
    refinable = bool(param_values.refinable(on_level))
    # Best-first over states merged across steps: finds deep witnesses; stops at the DSL's reward
    # bound (a proof) or at the validator's or shipped claim (not one); prunes by the bound. With a
    # numeric parameter not enumerated whole, a quarter of the budget is kept for refining its values.
    result = planner.search(worker, search.spec, actions=actions, max_nodes=search.nodes - (
        search.nodes // REFINE_SHARE if refinable else 0), seconds=search.seconds, stop_at=target)
    nodes, exhaustive, proof = result.nodes, False, result.proof
    best_at = result.best_at  # the nodes stepped, over all passes, when the best kept was first reached
    refuted, cut_by_clock, pruned = result.bound_refuted, result.cut_by_clock, result.pruned
    seen = [result.evidence]
    if refinable and proof is None and result.stopped != "bound" and search.nodes > nodes:
        # Best-first again with the values around those the witness used (or the grid bisected),
        # on what is left of the budget, pruning what cannot beat the first pass's best.
        values = param_values.refine(on_level, values, result.witness)
        if on_level.candidates(values) != actions:
            actions = on_level.candidates(values)
            worker.reset(source)
            again = planner.search(worker, search.spec, actions=actions, max_nodes=search.nodes - nodes,
                                   seconds=search.seconds, stop_at=target, bound=not refuted, floor=result.best_reward)
            nodes, cut_by_clock, pruned = nodes + again.nodes, cut_by_clock or again.cut_by_clock, pruned + again.pruned
            refuted, seen = refuted or again.bound_refuted, seen + [again.evidence]
            if again.best_reward > result.best_reward + EPS:
                result, proof, best_at = again, again.proof, nodes - again.nodes + again.best_at
    # The bound is the host's own reading of the DSL; the worker only says whether a step broke it.
    declared = planner.reward_bound(search.spec.config)
    upper = planner.bound_total(declared, search.spec.max_steps) if declared and not refuted else None
    at_claim = result.stopped == "bound"  # it stopped on reaching the validator's or shipped claim: no proof
    if proof is None and result.exhausted and search.nodes > nodes:
        # The merged space was exhausted: the space with the step in the key may be small enough
        # to exhaust too, which proves the max (breadth-first, with what is left of the budget,
        # pruning what cannot beat the best found so far).
        worker.reset(source)
        keyed = planner.search(worker, search.spec, actions=actions, time_in_key=True, order="breadth",
                               max_nodes=search.nodes - nodes, seconds=search.seconds,
                               bound=not refuted, floor=result.best_reward)
        # Exhaustive over the candidate actions; over the env's action space only when those are all of it.
        nodes, exhaustive = nodes + keyed.nodes, keyed.exhausted and search.spec.actions.complete()
        cut_by_clock, pruned = cut_by_clock or keyed.cut_by_clock, pruned + keyed.pruned
        refuted = refuted or keyed.bound_refuted
        upper, seen = None if refuted else upper, seen + [keyed.evidence]
        if keyed.best_reward > result.best_reward + EPS:
            result, best_at = keyed, nodes - keyed.nodes + keyed.best_at
        if exhaustive or keyed.proof == "upper_bound":
            proof = "exhausted" if exhaustive else "upper_bound"
    worker.reset(source)
    achieved, _, steps = replay(worker, result.witness)
    if abs(achieved - result.best_reward) > EPS or steps != len(result.witness):
        raise Rejected(f"{source}: expected the search's witness ({len(result.witness)} actions) to score "
                       f"{result.best_reward:g} again when replayed from a fresh reset, found {achieved:g} after "
                       f"{steps} step(s): the environment does not behave the same after a snapshot is restored "
                       f"(state kept outside _state and the env's attributes, or another random source?)",
                       cause=WitnessNotReplayed(source, len(result.witness), float(tidy(result.best_reward)),
                                                float(tidy(achieved)), steps))
    lm = LevelMax(source, digest, achieved, "", bound, achieved, exhaustive, nodes, list(result.witness),
                  nothing_reward=nothing, values=param_values.report(values, first_values) or None)
    lm.cut_by_clock, lm.bound_refuted, lm.stopped_at_claim = cut_by_clock, refuted or "", at_claim and not proof
    lm.proof, lm.nodes_to_best = proof or "", best_at
    lm.upper_bound = achieved if proof else upper
    searched = f"{'exhaustive ' if exhaustive else ''}search over {nodes} nodes" + (
        f" ({pruned} branches pruned by the DSL's reward bound)" if pruned else "") + (
        " (cut by the --search-seconds safety stop: depends on machine load)" if cut_by_clock else "")
    if bound is None:
        lm.calculation_method = "search_exhaustive" if exhaustive else "search_witness"
        lm.notes = f"no validator bound; the replayed witness of the {searched} scores {achieved:g}"
    elif achieved > bound + EPS:
        lm.calculation_method, lm.corrected = "search_witness", True
        lm.notes = (
            f"validator bound {bound:g} is below what the replayed search witness scores ({achieved:g}); corrected"
        )
    elif achieved < bound - EPS and proof:
        lm.calculation_method, lm.corrected = "search_exhaustive" if exhaustive else "search_witness", True
        lm.notes = (f"validator bound {bound:g} is above what any action sequence scores ("
                    f"{searched}{'' if exhaustive else ', declared bound met'}); corrected")
    elif achieved < bound - EPS:
        lm.max_reward, lm.calculation_method = bound, "validator_analytic"
        lm.notes = f"validator bound kept, unconfirmed: the {searched} (budget spent) reached {achieved:g}"
    else:
        lm.max_reward, lm.calculation_method = bound, "validator_analytic+search_witness"
        lm.notes = f"validator bound confirmed: the replayed witness of the {searched} scores it"
    if proof == "upper_bound":
        lm.notes += f"; exact: {planner.bound_text(declared, search.spec.max_steps)}, and the witness scores it"
    elif proof == "exhausted":
        lm.notes += "; exact: every reachable state was searched" + (
            " or pruned as unable to beat the best by the DSL's reward bound "
            f"({planner.bound_text(declared, search.spec.max_steps)})" if pruned else "")
    elif refuted:
        lm.notes += f"; the DSL's reward bound does not hold: {refuted}"
    elif upper is not None:
        lm.notes += f"; upper bound {upper:g}: {planner.bound_text(declared, search.spec.max_steps)}"
    lm.best_seen = max(achieved, nothing)
    if nothing > lm.max_reward + EPS:
        # No max may sit below a rollout envforge has seen (a budget-cut search, a wrong bound).
        lm.max_reward, lm.corrected, lm.calculation_method = nothing, True, "no_op_rollout"
        lm.witness = [no_op(search.spec)] * search.spec.max_steps
        lm.notes += f"; doing nothing scores {nothing:g}, more than that: max raised to it"
        lm.proof, lm.upper_bound = "", None if lm.upper_bound is None or lm.upper_bound < nothing else lm.upper_bound
    if lm.calculation_method in ("search_witness", "no_op_rollout") and not lm.proof:
        lm.certainty = "lower_bound"
        cut = "the search stopped on reaching the claimed max, which proves nothing" if at_claim else \
            "the search budget ran out"
        lm.notes += f" (a lower bound: {cut})" if lm.upper_bound is None else (
            f" (a lower bound: the max is between {lm.max_reward:g} and the DSL's bound {lm.upper_bound:g}, "
            f"gap {tidy(lm.upper_bound - lm.max_reward):g})")
        if lm.upper_bound is None:
            lm.evidence_bound, lm.evidence = evidence_bound(seen, search.spec.max_steps, lm.max_reward)
            if lm.evidence:
                lm.notes += f"; {lm.evidence}"
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


def evidence_bound(seen: list[dict | None], max_steps: int, best: float) -> tuple[float | None, str]:
    """What the search's steps suggest about a max no bound covers, and how it was derived, in words:
    the largest step reward seen, once when every paying step ended the episode, else on every step
    to the cap; never below `best`. A hypothesis (a step the search did not take may pay more), so
    it is labelled so and never makes a max exact. (None, "") when no step paid."""
    seen = [e for e in seen if e]
    step_max = max((e["step_max"] for e in seen), default=0.0)
    if step_max <= EPS:
        return None, ""
    steps, once = sum(e["steps"] for e in seen), all(e["paying_steps_end"] for e in seen)
    value = tidy(max(best, step_max if once else step_max * max_steps))
    how = (f"every paying step of the {steps:,} the search took ended the episode and paid at most {step_max:g}"
           if once else f"the {steps:,} steps the search took paid at most {step_max:g} each, over {max_steps} steps")
    return value, f"the evidence suggests at most {value:g} ({how}; not a proof)"


def _nothing(search: Search, worker: EnvClient, source: str) -> float:
    """What doing nothing scores: the no-op action until the episode ends; 0 without a no-op."""
    if no_op(search.spec) is None:
        return 0.0
    worker.reset(source)
    total, _, _ = replay(worker, [no_op(search.spec)] * search.spec.max_steps)
    return total
