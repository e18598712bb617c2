"""Stage 3, reliability (model-free): the reward must tell a skilled agent from an unskilled one.

The unskilled agent is envforge's random agent (`envforge evaluate --agent random`,
pipeline.evaluate.agents.RandomAgent: uniformly random declared actions with sampled parameters,
WorldTest's random agent, seeded by the env's meta.id, the level and the run), so verify's random
episode N on a level is evaluate's run N there; the skilled one is the search planner, replaying
its certified witness. Every episode here goes through the one episode engine
(pipeline.evaluate.episode), each policy an agent. Normalized reward = episode total / the level's certified max
reward (levels stage).
The environment is rejected when the planner cannot score (mean normalized 0) or when the
random agent's mean comes within `margin` of the planner's (random_mean >= planner_mean -
margin; default margin 0.2): then the reward does not measure skill.

Degenerate strategies are baselines too: every constant-action policy (each declared action
repeated until the episode ends, with up to CONSTANT_PARAMS typical parameter combinations: the
search's candidates, spread evenly) and doing nothing (the no-op repeated, one of them when the
env declares one). A reward that such a policy nearly maxes — its mean normalized score within
`margin` of the planner's, and the planner a skilled agent or the policy itself within `margin`
of the max — is rejected, naming the policy ("repeating RESEARCH scores 0.93 of the max").

Invalid play is a control too: each action the space calls invalid of the kinds agents send (an
undeclared name, a parameter outside its declared range or values, of the wrong type, or missing:
ActionSpace.invalid_examples) repeated until the episode ends, as a constant policy is. It earns
nothing a skilled agent could not: a total above the level's max, or above the best of doing
nothing and every constant policy there by `margin` of the max, is rejected naming the policy and
the level (an environment paying a "discovery" bonus for unknown action names).

The random agent's mean normalized score per level is the difficulty baseline kept in
manifest.json for evaluation tables. A random or constant-policy episode that scores above a
level's max reward proves the max wrong: the episode becomes the level's witness and max
(`corrected`). Levels whose max is unknown or not positive score nobody (nothing to divide by):
they are named in the figures and left out of every mean.
"""
from __future__ import annotations

import contextlib
import dataclasses
import queue
from concurrent.futures import ThreadPoolExecutor
from statistics import mean

from envforge.pipeline import difficulty, layout
from envforge.pipeline.errors import Rejected
from envforge.pipeline.evaluate.agents import ActionsAgent, RandomAgent
from envforge.pipeline.evaluate.episode import run_episode_sync
from envforge.pipeline.kinds import ConstantPolicyScore, LevelScores, ReliabilityFigures
from envforge.pipeline.levelmax import EPS, LevelMax, scorable, tidy, unscored_reason
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import Level
from envforge.pipeline.verify import claims
from envforge.pipeline.verify.causes import (
    DegeneratePolicy,
    DoingNothingScoresMax,
    InvalidPlayPays,
    NoBetterThanRandom,
    NoScorableLevels,
    PlannerScoresNothing,
    crashed,
)
from envforge.pipeline.verify.certify import write_max_rewards
from envforge.pipeline.verify.context import Context, failure_text, located
from envforge.pipeline.verify.outcome import StageOutcome, settle

RANDOM_AGENT = "uniform random declared action with sampled parameters"
CONSTANT_PARAMS = 3  # parameter combinations per action tried as a constant policy


def run(ctx: Context, levels: list[LevelMax]) -> StageOutcome[ReliabilityFigures]:
    """The levels, with any max reward a random or constant-policy episode corrected (and, when the
    environment passes and verify writes, level_max_rewards.json rewritten with them), and its figures."""
    policies = constant_policies(ctx) + invalid_policies(ctx)
    figures = ReliabilityFigures(levels=len(levels), margin=float(ctx.options.margin), random_agent=RANDOM_AGENT,
                                 random_episodes_per_level=ctx.options.random_episodes,
                                 workers=max(1, min(ctx.options.workers, len(levels))),
                                 constant_policies=[name for name, _ in constant_policies(ctx)])
    return settle("reliability", figures, lambda figures: _score(ctx, levels, policies, figures))


def _score(ctx: Context, levels: list[LevelMax], policies: list[tuple[str, dict]],
           figures: ReliabilityFigures) -> list[LevelMax]:
    out, constant_totals = [], {}
    try:
        for (lm, scores, totals), episodes in _each_level(ctx, levels, policies, figures.workers):
            figures.episodes += episodes
            figures.per_level[layout.level_key(lm.source)] = scores
            constant_totals[lm.source] = totals
            out.append(lm)
    except SandboxFailure as f:
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the reliability episodes to run without failure, "
                       f"found {failure_text(f)}",
                       cause=crashed(f, layout.ENV_MAIN, "the reliability episodes")) from None
    if not out:
        raise Rejected("levels: expected levels with a certified max reward to score agents on, found none",
                       cause=NoScorableLevels(0))
    if ctx.claims and "/" in out[0].source:
        figures.claims = claims.compare(ctx.claims, out)
    figures.corrected = sum(lm.corrected for lm in out)
    scored = [lm for lm in out if scorable(lm)]
    unscored = [lm for lm in out if not scorable(lm)]
    if unscored:
        figures.unscored_levels = {layout.level_key(lm.source): unscored_reason(lm) for lm in unscored}
    if not scored:
        raise Rejected(
            f"levels: expected levels with a known, positive max reward to score agents on, found none "
            f"of {len(out)}: " + "; ".join(f"{k}: {v}" for k, v in list(figures.unscored_levels.items())[:3]),
            cause=NoScorableLevels(len(out), dict(list(figures.unscored_levels.items())[:3]))
        )
    per_level = [figures.per_level[layout.level_key(lm.source)] for lm in scored]
    random_mean = float(round(mean(s.random_normalized for s in per_level), 4))
    planner_mean = float(round(mean(s.planner_normalized for s in per_level), 4))
    figures.random_normalized, figures.planner_normalized = random_mean, planner_mean
    idle = [lm for lm in out if lm.idle_scores_max]
    if idle and 2 * len(idle) >= len(out):
        example = idle[0]
        doing = f"the no-op '{ctx.no_op['action']}' until the episode ends" if ctx.no_op else "taking no step"
        raise Rejected(f"reward: expected a reward that pays for skill, found that doing nothing ({doing}) scores "
                       f"the maximum on {len(idle)} of {len(out)} level(s) (e.g. {layout.level_key(example.source)}: "
                       f"{example.nothing_reward:g} of {example.max_reward:g}): the reward pays for time passing, "
                       f"not for what the agent does",
                       cause=DoingNothingScoresMax(len(idle), len(out), layout.level_key(example.source),
                                                   float(tidy(example.nothing_reward)), float(tidy(example.max_reward)),
                                                   ctx.no_op["action"] if ctx.no_op else None))
    _degenerate(ctx, scored, constant_totals, planner_mean, figures)
    _invalid_play_pays(ctx, scored, constant_totals, figures)
    figures.trivial_levels = trivial_levels(ctx, scored, constant_totals) or None
    profiled = {layout.level_key(lm.source): lm.difficulty.score for lm in scored if lm.difficulty}
    if profiled:
        figures.difficulty, figures.difficulty_bands = profiled, difficulty.histogram(list(profiled.values()))
    if planner_mean <= 0 and any(lm.search_exhaustive for lm in out):
        raise Rejected(f"reward: expected the search planner to score on the levels, found a mean normalized "
                       f"reward of {planner_mean:g} over {len(scored)} level(s)",
                       cause=PlannerScoresNothing(planner_mean, len(scored)))
    if planner_mean < 1 - ctx.options.margin and random_mean >= planner_mean - ctx.options.margin:
        # The planner is no skilled agent here (its search ran out of budget or candidate actions), so
        # a random agent coming close says nothing about the reward: no verdict either way.
        figures.inconclusive = (f"the search planner scores only {planner_mean:.3f} of the max (its search "
                                   f"budget or candidate actions fall short), so its margin over the random agent "
                                   f"({random_mean:.3f}) does not measure the reward")
        return _corrected(ctx, out, figures)
    if random_mean >= planner_mean - ctx.options.margin:
        raise Rejected(f"reward: expected the search planner's mean normalized reward ({planner_mean:.3f}) to exceed "
                       f"the random agent's ({random_mean:.3f}) by more than the margin {ctx.options.margin:g}, found "
                       f"a difference of {planner_mean - random_mean:.3f}: the reward does not measure skill",
                       cause=NoBetterThanRandom(planner_mean, random_mean, float(ctx.options.margin), len(scored)))
    return _corrected(ctx, out, figures)


def _corrected(ctx: Context, levels: list[LevelMax], figures: ReliabilityFigures) -> list[LevelMax]:
    """A max reward this stage corrected, and each level's difficulty profile, are written to the
    folder's level_max_rewards.json."""
    if (figures.corrected or figures.difficulty) and "/" in levels[0].source and ctx.options.write:
        write_max_rewards(ctx, levels)
    return levels


def constant_policies(ctx: Context) -> list[tuple[str, dict]]:
    """(name, action) of every constant-action policy: each declared action with up to
    CONSTANT_PARAMS of its candidate parameter combinations, spread evenly; the no-op's is named
    "doing nothing"."""
    by_name: dict[str, list[dict]] = {}
    for action in ctx.space.candidates():
        by_name.setdefault(action["action"], []).append(action)
    out = []
    no_op = (ctx.no_op or {}).get("action")
    for name, combos in by_name.items():
        picked = combos if len(combos) <= CONSTANT_PARAMS else [
            combos[i * (len(combos) - 1) // (CONSTANT_PARAMS - 1)] for i in range(CONSTANT_PARAMS)]
        for action in picked:
            shown = f"repeating {_shown(action)}"
            out.append((f"doing nothing ({shown})" if name == no_op else shown, action))
    return out


def trivial_levels(ctx: Context, scored: list[LevelMax], totals: dict[str, dict[str, float]]) -> dict[str, str]:
    """level -> why it is trivial (`trivial_reason`). Named, not rejected: a set of them teaches nothing (issue 36)."""
    out = {}
    for lm in scored:
        why = trivial_reason(ctx, lm, totals[lm.source])
        if why:
            out[layout.level_key(lm.source)] = why
    return out


def trivial_reason(ctx: Context, lm: LevelMax, totals: dict[str, float]) -> str:
    """Why a scored level is trivial: doing nothing or one action repeated scores its max, or a witness
    of at most one step reaches it; "" when it is not. `totals`: the level's constant-policy totals."""
    if lm.nothing_reward >= lm.max_reward - EPS:
        return "doing nothing scores the max"
    best = max(((totals[name], name) for name, _ in constant_policies(ctx)), default=None)
    if best is not None and best[0] >= lm.max_reward - EPS:
        return f"{best[1]} scores the max"
    if lm.witness is not None and len(lm.witness) <= 1:
        return f"solved in {len(lm.witness)} step(s)"
    return ""


def invalid_policies(ctx: Context) -> list[tuple[str, dict]]:
    """(name, action) of each invalid-play control (module docstring)."""
    return [(f"repeating {what}", action) for what, action in ctx.space.invalid_examples()]


def _invalid_play_pays(ctx: Context, scored: list[LevelMax], totals: dict[str, dict[str, float]],
                       figures: ReliabilityFigures) -> None:
    """Reject a reward that invalid play earns (module docstring)."""
    invalid = invalid_policies(ctx)
    if not invalid:
        return
    margin, declared = ctx.options.margin, [name for name, _ in constant_policies(ctx)]
    figures.invalid_play = {name: float(tidy(max(totals[lm.source][name] for lm in scored))) for name, _ in invalid}
    for lm in scored:
        baseline = max([lm.nothing_reward, 0.0] + [totals[lm.source][name] for name in declared])
        for name, action in invalid:
            total = totals[lm.source][name]
            if total > lm.max_reward + EPS or total > baseline + margin * lm.max_reward + EPS:
                level = layout.level_key(lm.source)
                raise Rejected(
                    f"reward: expected no reward for actions the environment does not declare, found that {name} "
                    f"scores {total:g} on {level} (max {lm.max_reward:g}; doing nothing and the constant policies "
                    f"of declared actions at most {baseline:g}): invalid play, not skill, earns the reward",
                    cause=InvalidPlayPays(name, action, level, float(tidy(total)), float(tidy(lm.max_reward)),
                                          float(tidy(baseline)), float(margin)))


def _shown(action: dict) -> str:
    params = action.get("params") or {}
    if not params:
        return str(action["action"])
    return f"{action['action']}(" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")"


def _degenerate(ctx: Context, scored: list[LevelMax], totals: dict[str, dict[str, float]], planner_mean: float,
                figures: ReliabilityFigures) -> None:
    """Reject a reward that a constant-action policy nearly maxes (module docstring)."""
    means, actions = {}, {}
    for name, action in constant_policies(ctx):  # not invalid play: _invalid_play_pays judges that
        actions[name] = action
        means[name] = float(round(mean(min(1.0, totals[lm.source][name] / lm.max_reward) for lm in scored), 4))
    ranked = sorted(means.items(), key=lambda kv: -kv[1])
    figures.constant_normalized = dict(ranked[:10])
    if not ranked:
        return
    name, best = ranked[0]
    margin = ctx.options.margin
    figures.best_constant_policy = ConstantPolicyScore(name, best)
    if best >= planner_mean - margin and (planner_mean >= 1 - margin or best >= 1 - margin):
        raise Rejected(f"reward: expected a reward that pays for skill, found that {name} until the episode ends "
                       f"scores {best:.2f} of the max (mean over {len(scored)} level(s); the search planner "
                       f"{planner_mean:.2f}, margin {margin:g}): one action repeated, not skill, earns the reward",
                       cause=DegeneratePolicy(name, actions[name], best, planner_mean, float(margin), len(scored)))


def _each_level(ctx: Context, levels: list[LevelMax], policies: list[tuple[str, dict]], count: int):
    """(_score_level's result, episodes played) for each level, in order, the levels on `count`
    workers at once (each level's episodes are seeded by the level, so which worker plays them
    changes nothing). The first failure in level order is raised."""
    with contextlib.ExitStack() as stack:
        free: queue.Queue = queue.Queue()
        for _ in range(count):
            free.put(stack.enter_context(ctx.worker()))

        def one(lm: LevelMax):
            worker, counts = free.get(), {"episodes": 0}
            try:
                return _score_level(ctx, worker, lm, counts, policies), counts["episodes"]
            finally:
                free.put(worker)

        pool = ThreadPoolExecutor(count, thread_name_prefix="reliability")
        stack.callback(pool.shutdown, cancel_futures=True)
        yield from pool.map(one, levels)


def _score_level(ctx: Context, worker, lm: LevelMax, counts: dict,
                 policies: list[tuple[str, dict]]) -> tuple[LevelMax, LevelScores, dict[str, float]]:
    totals = []
    level = Level.parse(lm.source)

    def raise_max(total: float, actions: list, what: str) -> None:
        nonlocal lm
        if lm.certainty in ("unknown", "unconfirmed_bound") and lm.validator_bound is not None and \
                lm.max_reward > EPS and abs(total - lm.max_reward) <= EPS:
            # The validator's bound, which the search did not reach, is reached by a replayed episode.
            lm = dataclasses.replace(
                lm,
                certainty="certified",
                notes=f"{lm.notes}; {what} scores the validator bound {lm.max_reward:g}: confirmed",
            )
        if total > lm.max_reward + EPS and lm.certainty != "estimate":  # an expectation: one episode above it is chance
            # No proof survives an episode scoring above it; an upper bound it beats is refuted.
            beaten = lm.upper_bound is not None and total > lm.upper_bound + EPS
            lm = dataclasses.replace(
                lm,
                proof="",
                upper_bound=None if beaten else lm.upper_bound,
                bound_refuted=f"{what} scored {total:g}, above the upper bound {lm.upper_bound:g}" if beaten
                else lm.bound_refuted,
            )
            lm = dataclasses.replace(
                lm,
                max_reward=total,
                witness=list(actions),
                corrected=True,
                calculation_method="random_episode_witness"
                if what == "a random episode"
                else "constant_policy_witness",
                certainty="lower_bound",
                notes=f"{what} scored {total:g}, above the max reward {lm.max_reward:g} ({lm.calculation_method}); "
                f"corrected",
            )

    for run in range(ctx.options.random_episodes):
        agent = RandomAgent.seeded(ctx.space, ctx.config, lm.source, run)
        episode = run_episode_sync(agent, worker, level, seed=run)
        counts["episodes"] += 1
        totals.append(episode.total_reward)
        raise_max(episode.total_reward, episode.actions, "a random episode")
    constant, declared = {}, {name for name, _ in constant_policies(ctx)}
    for name, action in policies:
        episode = run_episode_sync(ActionsAgent([action] * ctx.max_steps), worker, level)
        counts["episodes"] += 1
        constant[name] = episode.total_reward
        if name in declared:  # what invalid play scores is no max: _invalid_play_pays judges it
            raise_max(episode.total_reward, episode.actions, name)
    planner_total = run_episode_sync(ActionsAgent(lm.witness), worker, level).total_reward
    counts["episodes"] += 1
    if lm.certainty == "estimate":  # one episode is one chance outcome: the planner scores its mean over seeds
        planner_total = lm.expectation["mean"]
    lm = dataclasses.replace(lm, best_seen=max(lm.best_seen, planner_total, *totals,
                                               *(v for k, v in constant.items() if k in declared)))
    if scorable(lm):  # how hard it is, from these episodes and one breadth-first search (pipeline/difficulty.py)
        lm = dataclasses.replace(lm, difficulty=difficulty.profile(
            ctx.spec, worker, lm, totals, [v for k, v in constant.items() if k in declared],
            nodes=ctx.options.profile_nodes, trivial=trivial_reason(ctx, lm, constant),
            chance=lm.expectation is not None))
    scores = LevelScores(float(tidy(lm.max_reward)), lm.certainty, float(round(mean(totals), 4)),
                         float(tidy(planner_total)))
    if scorable(lm):
        scores.random_normalized = float(round(mean(totals) / lm.max_reward, 4))
        scores.planner_normalized = float(round(planner_total / lm.max_reward, 4))
    else:
        scores.unscored = unscored_reason(lm)
    return lm, scores, constant
