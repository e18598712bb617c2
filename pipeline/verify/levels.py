"""Stage 2, levels: a generator that makes distinct valid levels, and a certified max reward per level.

Generation. Seeds 1, 2, … go to `generate_level` until `test_levels + val_levels` (10 + 5)
levels are kept or `max_seeds` attempts are spent. A level counts once: levels with the same
canonical state hash are duplicates (a generator that ignores its seed makes nothing else).
A level is kept when the validator accepts it and it is *fit*: search scores more on it than
doing nothing, and doing nothing does not already score its maximum. "Doing nothing" is
repeating the declared no-op action (a parameterless `wait`, `noop`, `stay`, …) until the
episode ends; without one it is taking no step, which scores 0.

The max reward of each kept level is certified by pipeline/levelmax.py (pooled by verify/certify.py). When the folder
ships levels and `write_levels` is off, the generated ones only judge the generator: each is
searched until a witness beats doing nothing (`fit_only`), which decides fitness as the whole
budget would.

A validator that accepts a level on which an *exhaustive* search scores nothing accepts
unsolvable levels: the environment is rejected here. Shipped levels (files already in the
folder) must be fit; their max rewards are what level_max_rewards.json records unless
`write_levels` replaces them by the generated set.

A validator's verdict is a claim, weighed against evidence. A shipped level it rejects is still
searched: when a replayed witness scores on it (more than doing nothing), the validator is
*refuted* on that level, the level is judged by the evidence (kept, certified) and the figures
and the verdict name it with the witness ("validator refuted on N level(s)"). Without such a
witness the rejection stands. A validator that rejects every generated level makes generation
unusable, like a broken generator: the environment is rejected at this stage, saying so, while
the shipped levels are still certified.
"""
from __future__ import annotations

import contextlib
import dataclasses

from envforge.pipeline import layout, safe_io
from envforge.pipeline import records as files
from envforge.pipeline.errors import LocatedError, Rejected
from envforge.pipeline.kinds import LevelsFigures
from envforge.pipeline.levelfactory import EXAMPLES, GeneratorFailed, LevelFactory, Made
from envforge.pipeline.levelmax import EPS, LevelMax, scorable, tidy, unscored_reason
from envforge.pipeline.runtime.levels import save_level
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient, Level, Verdict
from envforge.pipeline.verify import chance, claims
from envforge.pipeline.verify.causes import (
    BadGeneratedLevel,
    GeneratorAndShippedLevelsFail,
    GeneratorCrashed,
    GeneratorIgnoresSeed,
    SafetyStop,
    ShippedLevelRefused,
    TooFewLevels,
    UnfitLevel,
    ValidatorAcceptsUnsolvable,
    ValidatorCrashed,
    ValidatorRejectsAll,
    ValTestOverlap,
    crashed,
)
from envforge.pipeline.verify.certify import PooledCertifier, write_max_rewards
from envforge.pipeline.verify.context import Context, failure_text, located
from envforge.pipeline.verify.outcome import StageOutcome, settle


def run(ctx: Context, _: list[LevelMax] | None) -> StageOutcome[LevelsFigures]:
    """The levels later stages score on, with their certified max rewards, and its figures."""
    figures = LevelsFigures(shipped_levels=len(ctx.env.all_levels()), search_budget={
        "nodes_per_level": ctx.options.search_nodes, "safety_seconds_per_search": ctx.options.search_seconds})
    return settle("levels", figures, lambda figures: _levels(ctx, figures))


def _levels(ctx: Context, figures: LevelsFigures) -> list[LevelMax]:
    scored: list[LevelMax] = []
    try:
        with contextlib.ExitStack() as stack:
            # No more workers than levels to certify at once (a batch of generated ones, or the shipped).
            wanted = max(ctx.options.test_levels + ctx.options.val_levels, len(ctx.env.all_levels()))
            workers = [stack.enter_context(ctx.worker()) for _ in range(max(1, min(ctx.options.workers, wanted)))]
            figures.search_workers = len(workers)
            _probe_chance(ctx, workers[0], figures)
            certifier = PooledCertifier(ctx, workers, figures)
            stack.callback(certifier.pool.shutdown)
            generator_broken = None
            try:
                generated = _generate(ctx, workers, certifier, figures)
            except Rejected as rejected:
                if ctx.options.write_levels or not ctx.env.all_levels():
                    raise
                generator_broken = rejected  # the shipped levels are still checked and certified
            if ctx.options.write_levels:
                scored = _write_levels(ctx, generated)
            elif ctx.env.all_levels():
                if generator_broken is not None:  # its failure may have ended those workers: fresh ones
                    workers = [stack.enter_context(ctx.worker()) for _ in workers]
                    certifier = PooledCertifier(ctx, workers, figures)
                    stack.callback(certifier.pool.shutdown)
                scored = _shipped_despite(generator_broken, ctx, workers[0], certifier)
            else:
                scored = generated
            if figures.stochastic and not ctx.options.write_levels:
                scored = _expectations(ctx, workers[0], scored, figures)
        _scored_figures(figures, scored, ctx)
        if scored and "/" in scored[0].source and ctx.options.write:
            write_max_rewards(ctx, scored)
            figures.written = [layout.LEVEL_MAX_REWARDS] + (
                [lm.source for lm in scored] if ctx.options.write_levels else []
            )
        if generator_broken is not None:
            refuted = figures.validator_refuted or {}
            if isinstance(generator_broken.cause, ValidatorRejectsAll):
                n = generator_broken.cause.rejected
                raise Rejected(
                    f"{layout.ENV_VALIDATOR}: expected the validator to accept some generated levels, found it "
                    f"rejects every one ({n} of {n} distinct levels "
                    f"from seeds 1..{figures.seeds_tried}): generation is unusable"
                    + (f"; {refuted_text(refuted, len(scored))}" if refuted else "")
                    + f"; the {len(scored)} shipped level(s) were checked and certified by search (see the"
                      f" levels figures)", cause=ValidatorRejectsAll(n)
                )
            raise Rejected(f"{generator_broken.reason}; the {len(scored)} shipped level(s) were checked and "
                           f"certified anyway" + (f" ({refuted_text(refuted, len(scored))})" if refuted else "")
                           + " (see the levels figures)", cause=generator_broken.cause)
    except Rejected as rejected:
        if scored:  # the levels a witness scores on still go through reliability's controls
            rejected.playable = getattr(rejected, "playable", None) or [lm for lm in scored if solved(lm)]
        both = rejected.cause if isinstance(rejected.cause, GeneratorAndShippedLevelsFail) else None
        for cause in (both.generator, both.shipped) if both else (rejected.cause,):
            if isinstance(cause, SafetyStop):  # labelled in the figures too: the verdict depends on load
                figures.generator_safety_stop = cause.detail
                break
        raise
    return scored


def _scored_figures(figures: LevelsFigures, scored: list[LevelMax], ctx: Context) -> None:
    figures.levels_scored = [lm.source for lm in scored]
    figures.corrected = sum(lm.corrected for lm in scored)
    figures.max_rewards = {layout.level_key(lm.source): float(tidy(lm.max_reward)) for lm in scored}
    lower = [lm for lm in scored if lm.certainty == "lower_bound"]
    figures.lower_bounds = [layout.level_key(lm.source) for lm in lower]
    figures.stopped_at_claim = [key for key, lm in zip(figures.lower_bounds, lower) if lm.stopped_at_claim]
    figures.exact_levels = [layout.level_key(lm.source) for lm in scored if lm.exact]
    # every level whose max must not divide a score (unknown, or not positive), with the reason
    figures.unknown_maxima = {layout.level_key(lm.source): unscored_reason(lm) for lm in scored if not scorable(lm)}
    figures.gaps = {layout.level_key(lm.source): float(round(lm.upper_bound - lm.max_reward, 6)) for lm in scored
                    if not lm.exact and lm.upper_bound is not None}
    # every lower bound with no upper bound, and why (the DSL's reward bound refuted, or none declared)
    figures.no_upper_bound = {
        layout.level_key(lm.source): (f"the DSL's reward bound is refuted: {lm.bound_refuted}" if lm.bound_refuted
                                      else "the DSL declares no positive reward")
        + (f"; {lm.evidence}" if lm.evidence else "")
        for lm in scored if lm.certainty == "lower_bound" and lm.upper_bound is None}
    figures.cut_by_safety_stop = [layout.level_key(lm.source) for lm in scored if lm.cut_by_clock]
    figures.parameter_values = {layout.level_key(lm.source): lm.values for lm in scored if lm.values} or None
    if ctx.claims and scored and "/" in scored[0].source:
        figures.claims = claims.compare(ctx.claims, scored)


def _shipped_despite(generator_broken: Rejected | None, ctx: Context, worker: EnvClient,
                     certifier: PooledCertifier) -> list[LevelMax]:
    """The shipped levels; when the generator already failed, a failure here names both."""
    try:
        return _shipped(ctx, worker, certifier, certifier.figures)
    except Rejected as rejected:
        if generator_broken is None:
            raise
        try:
            _judged_both(generator_broken, rejected)
        except Rejected as both:
            both.playable = getattr(rejected, "playable", None)
            raise both from None


def _judged_both(generator_broken: Rejected, rejected: Rejected) -> None:
    """Raise the rejection naming a broken generator and the shipped levels' failure."""
    if isinstance(generator_broken.cause, ValidatorRejectsAll) and isinstance(rejected.cause, ShippedLevelRefused):
        # Every level, generated or shipped, is refused: the validator is at fault, not the generator.
        raise Rejected(f"{layout.ENV_VALIDATOR}: expected the validator to accept some levels, found it rejects "
                       f"every one, all {generator_broken.cause.rejected} generated and the shipped ones, e.g. "
                       f"{rejected.reason}", cause=ValidatorRejectsAll(generator_broken.cause.rejected,
                                                                        shipped_refused=True)) from None
    raise Rejected(f"{generator_broken.reason}; and the shipped levels: {rejected.reason}",
                   cause=GeneratorAndShippedLevelsFail(generator_broken.cause, rejected.cause)) from None


def _generate(ctx: Context, workers: list[EnvClient], certifier: PooledCertifier,
              figures: LevelsFigures) -> list[LevelMax]:
    """Seeds 1..max_seeds through the level factory (generated on every worker); its counts go to the
    figures, also when it fails."""
    want = ctx.options.test_levels + ctx.options.val_levels
    made = Made()
    # Kept only when written or when the folder ships none; else only whether each is fit is asked.
    kept_as_levels = ctx.options.write_levels or not ctx.env.all_levels()
    figures.generated_searched_until_fit = not kept_as_levels
    first = ctx.options.first_seed
    factory = LevelFactory(workers, range(first, first + ctx.options.max_seeds),
                           certifier if kept_as_levels else certifier.fitness, validate=_validate)
    try:
        factory.make(want, chance=bool(figures.stochastic), made=made)
    except GeneratorFailed as e:
        raise Rejected(f"{located(e.failure, layout.ENV_GENERATE)}: expected generate_level to make a level for "
                       f"seed {e.seed}, found {failure_text(e.failure)}",
                       cause=_safety_stop(e.failure) or GeneratorCrashed(e.seed, e.failure.kind,
                                                                         located(e.failure, layout.ENV_GENERATE))
                       ) from None
    finally:
        figures.seeds_tried, figures.duplicates, figures.unfit = made.seeds_tried, made.duplicates, made.unfit
        figures.rejected_by_validator = made.rejected_by_validator
        figures.examples = (figures.examples + made.examples)[:EXAMPLES]
        if made.validator_warnings:
            figures.validator_warnings = (figures.validator_warnings or {}) | made.validator_warnings
    kept = made.kept
    figures.generated_kept = len(kept)
    figures.distinct_levels = made.distinct
    if made.unsolvable:
        first = made.unsolvable[0]
        raise Rejected(f"{layout.ENV_VALIDATOR}: expected validate_level to reject levels that no action sequence "
                       f"can score on, found it accepted {len(made.unsolvable)} such level(s), e.g. the level of seed "
                       f"{first.seed}: {first.unfit}",
                       cause=ValidatorAcceptsUnsolvable(len(made.unsolvable), first.seed, first.unfit))
    if len(kept) < want:
        tried = figures.seeds_tried
        if made.distinct == 1 and tried > 1:
            raise Rejected(f"{layout.ENV_GENERATE}: expected generate_level(seed, config) to make different levels "
                           f"for different seeds, found the same level for all {tried} seeds 1..{tried} "
                           f"(the generator ignores its seed)", cause=GeneratorIgnoresSeed(tried))
        refused = figures.rejected_by_validator
        raise Rejected(f"{layout.ENV_GENERATE}: expected at least {want} distinct valid levels from seeds "
                       f"1..{tried}, found {len(kept)} ({figures.duplicates} duplicates, "
                       f"{refused} rejected by the validator, {figures.unfit} unfit"
                       + (f"; e.g. {figures.examples[0]}" if figures.examples else "") + ")",
                       cause=ValidatorRejectsAll(refused) if 0 < refused == made.distinct
                       else TooFewLevels(want, len(kept), figures.duplicates, refused, figures.unfit))
    return kept


def _shipped(ctx: Context, worker: EnvClient, certifier: PooledCertifier, figures: LevelsFigures) -> list[LevelMax]:
    items, refused = [], {}
    for level in ctx.env.all_levels():
        verdict = _validate(worker, level, level=level)
        if not verdict.ok:
            refused[level] = verdict
        _warnings(figures, level, verdict)
        items.append((level, verdict))
    _distinct_shipped(items, figures)
    out = certifier.many(items)
    refuted, unrefuted = {}, []
    for i, lm in enumerate(out):
        verdict = refused.get(lm.source)
        if verdict is not None:
            issues = '; '.join(verdict.issues) or 'rejected without a reason'
            if not solved(lm):
                unrefuted.append((f"{lm.source}: expected the validator to accept this shipped level, found {issues} "
                                  f"(and no search witness scores on it: {_searched(lm)})", lm.source))
                continue
            refuted[layout.level_key(lm.source)] = {"issues": verdict.issues[:5], "witness": lm.witness,
                                                    "witness_reward": round(lm.search_reward, 9)}
            out[i] = dataclasses.replace(lm, notes=f"the validator rejects this level ({issues[:200]}); refuted: "
                                                   f"{lm.notes}")
        elif lm.unfit and lm.proven_unsolvable and figures.stochastic:
            out[i] = dataclasses.replace(lm, unfit="", proven_unsolvable=False, certainty="unknown",
                                         notes=f"{lm.notes}; the environment draws random numbers during step, so a "
                                               f"search over one chance outcome proves nothing: max unknown")
        elif lm.unfit:
            raise Rejected(f"{lm.source}: expected a level on which search scores more than doing nothing and "
                           f"doing nothing does not score the maximum, found {lm.unfit}",
                           cause=UnfitLevel(lm.source, float(tidy(lm.search_reward)), float(tidy(lm.nothing_reward)),
                                            lm.search_exhaustive, lm.unfit))
    if refuted:
        figures.validator_refuted = refuted
        _warn(figures, refuted_text(refuted, len(out)))
    if unrefuted:  # the validator's word stands on these; on the others the witnesses refute it
        reason, source = unrefuted[0]
        rejection = Rejected(reason + (f"; {refuted_text(refuted, len(out))}" if refuted else ""),
                             cause=ShippedLevelRefused(source, len(refuted)))
        refused_here = {s for _, s in unrefuted}
        rejection.playable = [lm for lm in out if lm.source not in refused_here and solved(lm)]
        raise rejection
    return out


def _probe_chance(ctx: Context, worker: EnvClient, figures: LevelsFigures) -> None:
    """figures.stochastic: where a step first drew random numbers (chance.py), or False."""
    levels = [Level(file=f) for f in ctx.env.all_levels()] or [Level(seed=s) for s in (1, 2, 3)]
    try:
        found = chance.probe(ctx, worker, levels)
    except SandboxFailure as f:
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected random actions on {levels[0]} to run without "
                       f"failure, found {failure_text(f)}",
                       cause=crashed(f, layout.ENV_MAIN, "random actions probing for randomness")) from None
    figures.stochastic = found or False
    if found:
        figures.stochastic_note = (f"the environment draws random numbers during step (first at "
                                   f"{chance.where(found)}): no level is called unsolvable on one chance outcome, "
                                   f"and a level file's max reward is an expectation estimate with its 95% "
                                   f"confidence interval: the best mean of the replanning agent, the search witness "
                                   f"and the constant policies over chance seeds (a lower bound)")
        _warn(figures, figures.stochastic_note)


def _expectations(ctx: Context, worker: EnvClient, scored: list[LevelMax], figures: LevelsFigures) -> list[LevelMax]:
    """A stochastic environment's level files: max reward = the best policy's expected total over
    chance seeds (chance.estimate_max), labelled an estimate and a lower bound; unknown only when no
    episode scored."""
    from envforge.pipeline.verify.reliability import constant_policies  # reliability's baselines, one list

    constants, out = constant_policies(ctx), []
    for lm in scored:
        if "/" not in lm.source:
            out.append(lm)
            continue
        try:
            found, played = chance.estimate_max(ctx, worker, lm, constants)
        except SandboxFailure as f:
            raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the episodes of {lm.source} over other chance "
                           f"seeds to run without failure, found {failure_text(f)}",
                           cause=crashed(f, layout.ENV_MAIN, "episodes over other chance seeds", lm.source)) from None
        out.append(_estimated(lm, found, played))
    figures.expectation_estimates = {layout.level_key(lm.source): lm.expectation for lm in out if lm.expectation}
    return out


def _estimated(lm: LevelMax, found: dict, played: list) -> LevelMax:
    """A level file of a stochastic environment with its max estimate `found` (chance.estimate_max)."""
    plans = found["replanning"]
    tried = (f"{found['episodes_tried']} episodes over chance seeds: the replanning agent {plans['mean']:g} on "
             f"average over seeds 1..{plans['seeds']} ({plans['scored']} scored; {plans['plan_nodes']} search nodes "
             f"a decision, {plans['search_nodes']:,} in all)"
             + "".join(f", {name} {mean:g}" for name, mean in list(found["tried"].items())[1:4])
             + (f" and {len(found['tried']) - 4} more" if len(found["tried"]) > 4 else "")
             + (f" over {chance.ESTIMATE_SEEDS} seeds each" if len(found["tried"]) > 1 else ""))
    if found["scored_episodes"] == 0:
        return dataclasses.replace(lm, certainty="unknown", expectation=found, notes=(
            f"stochastic: no episode scored in {tried}: max unknown; {lm.notes}"))
    witness = lm.witness if lm.search_reward > EPS or not played else played
    return dataclasses.replace(
        lm, max_reward=found["mean"], calculation_method="expectation_estimate", certainty="estimate",
        expectation=found, witness=witness, unfit="", proven_unsolvable=False, notes=(
            f"stochastic: expectation estimate, a lower bound (the best policy's mean; the best policy may score "
            f"more): {found['policy']} scores {found['mean']:g} on average over {found['seeds']} chance seeds "
            f"(95% interval {found['ci95'][0]:g} to {found['ci95'][1]:g}), the best of {tried}; one seed's search "
            f"best: {lm.search_reward:g}; {lm.notes}"))


def _distinct_shipped(items: list[tuple[str, Verdict]], figures: LevelsFigures) -> None:
    """Shipped levels are held to what generated ones are: distinct (a duplicate is named, a warning)
    and no validation level equal to a test level (that rejects: the split would measure nothing)."""
    first: dict[str, str] = {}
    duplicates = []
    for level, verdict in items:
        if verdict.state_hash in first:
            duplicates.append((level, first[verdict.state_hash]))
        else:
            first[verdict.state_hash] = level
    if not duplicates:
        return
    figures.shipped_duplicates = {level: same for level, same in duplicates}
    overlap = [(level, same) for level, same in duplicates
               if level.startswith(f"{layout.VAL_LEVELS}/") and same.startswith(f"{layout.LEVELS}/")]
    shown = "; ".join(f"{level} = {same}" for level, same in (overlap or duplicates)[:4])
    if overlap:
        raise Rejected(f"{layout.VAL_LEVELS}: expected validation levels apart from the test levels, found "
                       f"{len(overlap)} identical to a test level ({shown}); {len(first)} distinct of "
                       f"{len(items)} shipped level(s)",
                       cause=ValTestOverlap(len(overlap), len(first), len(items), dict(overlap)))
    _warn(figures, f"{layout.LEVELS}: expected distinct shipped levels, found {len(duplicates)} duplicate(s) "
                   f"({shown}); {len(first)} distinct of {len(items)}")


def solved(lm: LevelMax) -> bool:
    """Evidence that a level can be played: a replayed search witness scores on it, above doing nothing."""
    return lm.search_reward > max(lm.nothing_reward, 0.0) + EPS and bool(lm.witness)


def refuted_text(refuted: dict, total: int) -> str:
    key, first = next(iter(refuted.items()))
    witness = first["witness"]
    shown = ", ".join(_fmt(a) for a in witness[:12]) + (", ..." if len(witness) > 12 else "")
    return (f"{layout.ENV_VALIDATOR}: validator refuted on {len(refuted)} of {total} shipped level(s): it rejects "
            f"them, yet a replayed search witness scores on each (e.g. {key}: rejected for "
            f"{(first['issues'] or ['no reason given'])[0][:160]!r}; {len(witness)} action(s) score "
            f"{first['witness_reward']:g}: {shown})")


def _searched(lm: LevelMax) -> str:
    return (f"{'exhaustive ' if lm.search_exhaustive else ''}search over {lm.search_nodes} nodes scores"
            f" {lm.search_reward:g}")


def _fmt(action: dict) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in (action.get("params") or {}).items())
    return f"{action.get('action')}({params})" if params else str(action.get("action"))


def _warn(figures: LevelsFigures, warning: str) -> None:
    figures.warnings = (figures.warnings or []) + [warning]


def _warnings(figures: LevelsFigures, what: str, verdict: Verdict) -> None:
    """The validator's warnings on a level it accepts: warnings, never a rejection."""
    if verdict.ok and verdict.warnings:
        warned = figures.validator_warnings = figures.validator_warnings or {}
        if len(warned) < 20:
            warned[layout.level_key(what) if "/" in what else what] = verdict.warnings[:5]


def _write_levels(ctx: Context, generated: list[LevelMax]) -> list[LevelMax]:
    """Replace the folder's level files by the generated set (only with write_levels)."""
    for folder in (layout.LEVELS, layout.VAL_LEVELS):
        for old in (ctx.env.path / folder).glob("*.yaml"):
            old.unlink()
    out = []
    for i, lm in enumerate(generated):
        folder = layout.LEVELS if i < ctx.options.test_levels else layout.VAL_LEVELS
        source = f"{folder}/level_{i + 1:02d}.yaml"
        if isinstance(lm.state, str):  # the worker's YAML: checked to be a level, written as it is
            try:
                level = safe_io.parse_yaml(lm.state, f"the level of seed {lm.seed}")
            except LocatedError as e:
                raise Rejected(f"{layout.ENV_GENERATE}: {e}", cause=BadGeneratedLevel(
                    lm.seed, e.problem.expected, e.problem.found)) from None
            if not isinstance(level, dict):
                raise Rejected(f"{layout.ENV_GENERATE}: expected the level of seed {lm.seed} to be a mapping (the "
                               f"level's state), found another YAML document", cause=BadGeneratedLevel(
                                   lm.seed, "a mapping (the level's state)", "another YAML document"))
            files.write_text(ctx.env.path / source, lm.state)
        else:
            save_level(ctx.env.path / source, lm.state)
        out.append(dataclasses.replace(lm, source=source))
    return out


def _validate(worker: EnvClient, what: str, **where) -> Verdict:
    """The validator's verdict on the level in `worker` (or `where`); a validator that fails rejects."""
    try:
        return worker.validate(**where)
    except SandboxFailure as f:
        raise Rejected(f"{located(f, layout.ENV_VALIDATOR)}: expected the validator to run on {what}, "
                       f"found {failure_text(f)}",
                       cause=_safety_stop(f) or ValidatorCrashed(str(what), f.kind, located(f, layout.ENV_VALIDATOR))
                       ) from None


def _safety_stop(failure: SandboxFailure) -> SafetyStop | None:
    """The cause of a rejection that the generator's or validator's wall-clock safety stop decided."""
    return SafetyStop(failure.detail) if failure.kind == "safety_stop" else None
