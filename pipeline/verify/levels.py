"""Stage 2, levels: a generator that makes distinct valid levels, and a certified max reward per level.

Generation. Seeds 1, 2, … go to `generate_level` until `test_levels + val_levels` (10 + 5)
levels are kept or `max_seeds` attempts are spent. A level counts once: levels with the same
canonical state hash are duplicates (a generator that ignores its seed makes nothing else).
A level is kept when the validator accepts it and it is *fit*: search scores more on it than
doing nothing, and doing nothing does not already score its maximum. "Doing nothing" is
repeating the declared no-op action (a parameterless `wait`, `noop`, `stay`, …) until the
episode ends; without one it is taking no step, which scores 0.

The max reward of each kept level is certified by pipeline/verify/certify.py.

A validator that accepts a level on which an *exhaustive* search scores nothing accepts
unsolvable levels: the environment is rejected here. Shipped levels (files already in the
folder) must all be accepted by the validator and be fit; their max rewards are what
level_max_rewards.json records unless `write_levels` replaces them by the generated set.
"""
from __future__ import annotations

import contextlib
import dataclasses

from pipeline import layout
from pipeline.runtime.levels import save_level
from pipeline.sandbox import SandboxFailure
from pipeline.sandbox.client import EnvClient, Level, Verdict
from pipeline.errors import Rejected
from pipeline.verify import claims
from pipeline.verify.certify import Certifier, LevelMax, write_max_rewards
from pipeline.verify.context import Clock, Context, failure_text, located


def run(ctx: Context, figures: dict) -> list[LevelMax]:
    """The levels later stages score on, with their certified max rewards; fills `figures`."""
    clock = Clock()
    figures |= {"seeds_tried": 0, "generated_kept": 0, "duplicates": 0, "rejected_by_validator": 0,
                "unfit": 0, "shipped_levels": len(ctx.env.all_levels()), "search_nodes": 0,
                "search_seconds": 0.0, "search_workers": ctx.options.workers, "corrected": 0, "examples": [],
                "search_budget": {"nodes_per_pass": ctx.options.search_nodes,
                                  "seconds_per_pass": ctx.options.search_seconds}}
    try:
        with contextlib.ExitStack() as stack:
            workers = [stack.enter_context(ctx.worker()) for _ in range(max(1, ctx.options.workers))]
            certifier = Certifier(ctx, workers, figures)
            stack.callback(certifier.pool.shutdown)
            generator_broken = None
            try:
                generated = _generate(ctx, workers[0], certifier, figures)
            except Rejected as rejected:
                if ctx.options.write_levels or not ctx.env.all_levels():
                    raise
                generator_broken = rejected  # the shipped levels are still checked and certified
            if ctx.options.write_levels:
                scored = _write_levels(ctx, generated)
            elif ctx.env.all_levels():
                if generator_broken is not None:  # its failure may have ended those workers: fresh ones
                    workers = [stack.enter_context(ctx.worker()) for _ in workers]
                    certifier = Certifier(ctx, workers, figures)
                    stack.callback(certifier.pool.shutdown)
                scored = _shipped_despite(generator_broken, ctx, workers[0], certifier)
            else:
                scored = generated
        _scored_figures(figures, scored, ctx)
        if scored and "/" in scored[0].source and ctx.options.write:
            write_max_rewards(ctx, scored)
            figures["written"] = [layout.LEVEL_MAX_REWARDS] + ([lm.source for lm in scored] if ctx.options.write_levels else [])
        if generator_broken is not None:
            raise Rejected(f"{generator_broken.reason}; the {len(scored)} shipped level(s) were checked and "
                           f"certified anyway (see the levels figures)")
    finally:
        figures.update(clock.figures())
    return scored


def _scored_figures(figures: dict, scored: list[LevelMax], ctx: Context) -> None:
    figures["levels_scored"] = [lm.source for lm in scored]
    figures["corrected"] = sum(lm.corrected for lm in scored)
    figures["max_rewards"] = {layout.level_key(lm.source): lm.max_reward for lm in scored}
    figures["lower_bounds"] = [layout.level_key(lm.source) for lm in scored if lm.certainty == "lower_bound"]
    if ctx.claims and scored and "/" in scored[0].source:
        figures["claims"] = claims.compare(ctx.claims, scored)


def _shipped_despite(generator_broken: Rejected | None, ctx: Context, worker: EnvClient,
                     certifier: Certifier) -> list[LevelMax]:
    """The shipped levels; when the generator already failed, a failure here names both."""
    try:
        return _shipped(ctx, worker, certifier)
    except Rejected as rejected:
        if generator_broken is None:
            raise
        if getattr(generator_broken, "all_rejected_by_validator", False) and rejected.reason.startswith(
                tuple(f"{folder}/" for folder in (layout.LEVELS, layout.VAL_LEVELS))) and \
                ": expected the validator to accept this shipped level" in rejected.reason:
            # Every level, generated or shipped, is refused: the validator is at fault, not the generator.
            raise Rejected(f"{layout.ENV_VALIDATOR}: expected the validator to accept some levels, found it rejects "
                           f"every one, all {generator_broken.rejected} generated and the shipped ones, e.g. "
                           f"{rejected.reason}") from None
        raise Rejected(f"{generator_broken.reason}; and the shipped levels: {rejected.reason}") from None


def _generate(ctx: Context, worker: EnvClient, certifier: Certifier, figures: dict) -> list[LevelMax]:
    """Seeds 1, 2, … in batches: generate and validate one by one, certify a batch at once."""
    want = ctx.options.test_levels + ctx.options.val_levels
    kept: list[LevelMax] = []
    seen: dict[str, int] = {}
    unsolvable: list[LevelMax] = []
    seed = 0
    while len(kept) < want and seed < ctx.options.max_seeds:
        batch = []
        while len(kept) + len(batch) < want and seed < ctx.options.max_seeds:
            seed += 1
            figures["seeds_tried"] += 1
            try:
                first = worker.reset(Level(seed=seed), want_state=True)
            except SandboxFailure as f:
                raise Rejected(f"{located(f, layout.ENV_GENERATE)}: expected generate_level to make a level for "
                               f"seed {seed}, found {failure_text(f)}") from None
            if first.state_hash in seen:
                figures["duplicates"] += 1
                continue
            seen[first.state_hash] = seed
            verdict = _validate(worker, f"the level generated with seed {seed}", state=first.state)
            if not verdict.ok:
                figures["rejected_by_validator"] += 1
                _example(figures, f"seed {seed}: rejected by the validator: "
                                  f"{'; '.join(verdict.issues) or 'no reason given'}")
                continue
            batch.append((seed, first.state, verdict))
        certified = certifier.many([(str(Level(seed=s)), verdict) for s, _, verdict in batch])
        for (s, state, _), lm in zip(batch, certified):
            lm = dataclasses.replace(lm, seed=s, state=state)
            if lm.unfit:
                figures["unfit"] += 1
                _example(figures, f"seed {s}: {lm.unfit}")
                if lm.proven_unsolvable:
                    unsolvable.append(lm)
            else:
                kept.append(lm)
    figures["generated_kept"] = len(kept)
    figures["distinct_levels"] = len(seen)
    if unsolvable:
        first = unsolvable[0]
        raise Rejected(f"{layout.ENV_VALIDATOR}: expected validate_level to reject levels that no action sequence "
                       f"can score on, found it accepted {len(unsolvable)} such level(s), e.g. the level of seed "
                       f"{first.seed}: {first.unfit}")
    if len(kept) < want:
        tried = figures["seeds_tried"]
        if len(seen) == 1 and tried > 1:
            raise Rejected(f"{layout.ENV_GENERATE}: expected generate_level(seed, config) to make different levels "
                           f"for different seeds, found the same level for all {tried} seeds 1..{tried} "
                           f"(the generator ignores its seed)")
        rejection = Rejected(f"{layout.ENV_GENERATE}: expected at least {want} distinct valid levels from seeds "
                       f"1..{tried}, found {len(kept)} ({figures['duplicates']} duplicates, "
                       f"{figures['rejected_by_validator']} rejected by the validator, {figures['unfit']} unfit"
                       + (f"; e.g. {figures['examples'][0]}" if figures["examples"] else "") + ")")
        rejection.rejected = figures["rejected_by_validator"]
        rejection.all_rejected_by_validator = rejection.rejected > 0 and rejection.rejected == len(seen)
        raise rejection
    return kept


def _shipped(ctx: Context, worker: EnvClient, certifier: Certifier) -> list[LevelMax]:
    items = []
    for level in ctx.env.all_levels():
        verdict = _validate(worker, level, level=level)
        if not verdict.ok:
            raise Rejected(f"{level}: expected the validator to accept this shipped level, found "
                           f"{'; '.join(verdict.issues) or 'rejected without a reason'}")
        items.append((level, verdict))
    out = certifier.many(items)
    for lm in out:
        if lm.unfit:
            raise Rejected(f"{lm.source}: expected a level on which search scores more than doing nothing and "
                           f"doing nothing does not score the maximum, found {lm.unfit}")
    return out


def _write_levels(ctx: Context, generated: list[LevelMax]) -> list[LevelMax]:
    """Replace the folder's level files by the generated set (only with write_levels)."""
    for folder in (layout.LEVELS, layout.VAL_LEVELS):
        for old in (ctx.env.path / folder).glob("*.yaml"):
            old.unlink()
    out = []
    for i, lm in enumerate(generated):
        folder = layout.LEVELS if i < ctx.options.test_levels else layout.VAL_LEVELS
        source = f"{folder}/level_{i + 1:02d}.yaml"
        save_level(ctx.env.path / source, lm.state)
        out.append(dataclasses.replace(lm, source=source))
    return out


def _validate(worker: EnvClient, what: str, **where) -> Verdict:
    try:
        return worker.validate(**where)
    except SandboxFailure as f:
        raise Rejected(f"{located(f, layout.ENV_VALIDATOR)}: expected the validator to run on {what}, "
                       f"found {failure_text(f)}") from None


def _example(figures: dict, text: str) -> None:
    if len(figures["examples"]) < 5:
        figures["examples"].append(text)
