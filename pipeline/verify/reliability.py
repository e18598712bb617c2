"""Stage 3, reliability (model-free): the reward must tell a skilled agent from an unskilled one.

The unskilled agent plays uniformly random declared actions with sampled parameters
(WorldTest's random agent); the skilled one is the search planner, replaying its certified
witness. Normalized reward = episode total / the level's certified max reward (levels stage).
The environment is rejected when the planner cannot score (mean normalized 0) or when the
random agent's mean comes within `margin` of the planner's (random_mean >= planner_mean -
margin; default margin 0.2): then the reward does not measure skill.

The random agent's mean normalized score per level is the difficulty baseline kept in
manifest.json for evaluation tables. A random episode that scores above a level's max reward
proves the max wrong: the episode becomes the level's witness and max (`corrected`).
"""
from __future__ import annotations

import dataclasses
import random
from statistics import mean

from pipeline import layout
from pipeline.planner import replay
from pipeline.rollout import run_episode
from pipeline.sandbox import SandboxFailure
from pipeline.errors import Rejected
from pipeline.sandbox.client import Level
from pipeline.verify import claims
from pipeline.verify.context import Clock, Context, failure_text, located
from pipeline.verify.certify import EPS, LevelMax

RANDOM_AGENT = "uniform random declared action with sampled parameters"


def run(ctx: Context, levels: list[LevelMax], figures: dict) -> list[LevelMax]:
    """The levels, with any max reward a random episode corrected; fills `figures`."""
    clock = Clock()
    rng = random.Random(ctx.options.seed + 1)
    figures |= {"levels": len(levels), "episodes": 0, "margin": ctx.options.margin, "random_agent": RANDOM_AGENT,
               "random_episodes_per_level": ctx.options.random_episodes, "per_level": {}}
    out = []
    try:
        with ctx.worker() as worker:
            for lm in levels:
                lm, scores = _score_level(ctx, worker, lm, rng, figures)
                figures["per_level"][layout.level_key(lm.source)] = scores
                out.append(lm)
    except SandboxFailure as f:
        raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the reliability episodes to run without failure, "
                       f"found {failure_text(f)}") from None
    finally:
        figures.update(clock.figures())
    if not out:
        raise Rejected("levels: expected levels with a certified max reward to score agents on, found none")
    if ctx.claims and "/" in out[0].source:
        figures["claims"] = claims.compare(ctx.claims, out)
    random_mean = round(mean(s["random_normalized"] for s in figures["per_level"].values()), 4)
    planner_mean = round(mean(s["planner_normalized"] for s in figures["per_level"].values()), 4)
    figures.update(random_normalized=random_mean, planner_normalized=planner_mean,
                   corrected=sum(lm.corrected for lm in out))
    idle = [lm for lm in out if lm.idle_scores_max]
    if idle and 2 * len(idle) >= len(out):
        example = idle[0]
        doing = f"the no-op '{ctx.no_op['action']}' until the episode ends" if ctx.no_op else "taking no step"
        raise Rejected(f"reward: expected a reward that pays for skill, found that doing nothing ({doing}) scores "
                       f"the maximum on {len(idle)} of {len(out)} level(s) (e.g. {layout.level_key(example.source)}: "
                       f"{example.nothing_reward:g} of {example.max_reward:g}): the reward pays for time passing, "
                       f"not for what the agent does")
    if planner_mean <= 0 and any(lm.search_exhaustive for lm in out):
        raise Rejected(f"reward: expected the search planner to score on the levels, found a mean normalized "
                       f"reward of {planner_mean:g} over {len(out)} level(s)")
    if planner_mean < 1 - ctx.options.margin and random_mean >= planner_mean - ctx.options.margin:
        # The planner is no skilled agent here (its search ran out of budget or candidate actions), so
        # a random agent coming close says nothing about the reward: no verdict either way.
        figures["inconclusive"] = (f"the search planner scores only {planner_mean:.3f} of the max (its search "
                                   f"budget or candidate actions fall short), so its margin over the random agent "
                                   f"({random_mean:.3f}) does not measure the reward")
        return out
    if random_mean >= planner_mean - ctx.options.margin:
        raise Rejected(f"reward: expected the search planner's mean normalized reward ({planner_mean:.3f}) to exceed "
                       f"the random agent's ({random_mean:.3f}) by more than the margin {ctx.options.margin:g}, found "
                       f"a difference of {planner_mean - random_mean:.3f}: the reward does not measure skill")
    return out


def _score_level(ctx: Context, worker, lm: LevelMax, rng: random.Random, figures: dict) -> tuple[LevelMax, dict]:
    totals = []
    level = Level.parse(lm.source)
    for i in range(ctx.options.random_episodes):
        episode = run_episode(worker, lambda obs, last: ctx.space.sample(rng), level, seed=i)
        figures["episodes"] += 1
        totals.append(episode.total_reward)
        if episode.total_reward > lm.max_reward + EPS:
            lm = dataclasses.replace(
                lm, max_reward=episode.total_reward, witness=list(episode.actions), corrected=True,
                calculation_method="random_episode_witness", certainty="lower_bound",
                notes=f"a random episode scored {episode.total_reward:g}, above the max reward {lm.max_reward:g} "
                      f"({lm.calculation_method}); corrected")
    worker.reset(level)
    planner_total, _, _ = replay(worker, lm.witness)
    figures["episodes"] += 1
    lm = dataclasses.replace(lm, best_seen=max(lm.best_seen, planner_total, *totals))
    scale = lm.max_reward if lm.max_reward > 0 else 1.0
    return lm, {"max_reward": lm.max_reward, "max_certainty": lm.certainty, "random_mean_total": round(mean(totals), 4),
                "random_normalized": round(mean(totals) / scale, 4),
                "planner_total": planner_total, "planner_normalized": round(planner_total / scale, 4)}
