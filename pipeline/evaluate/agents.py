"""The model-free agents: the uniform random agent, the search planner, and a fixed action sequence.

Agents match the `EpisodeAgent` protocol (pipeline.evaluate): `await agent.act(turn) -> Decision`.
One agent object plays one episode; `make(ctx)` builds it from the episode's context.
"""
from __future__ import annotations

import asyncio
import random

from envforge.pipeline import planner
from envforge.pipeline.evaluate.context import EpisodeContext
from envforge.pipeline.evaluate.episode import Decision, Turn


class RandomAgent:
    """A uniformly random declared action with sampled parameters: envforge's one random agent,
    `--agent random` in evaluate and the baseline verify's reliability stage measures against
    (its difficulty_baseline in manifest.json). `seeded` seeds it by (the DSL's meta.id, level,
    run), so a re-run plays the same episode, a copy of the folder under another name too, and
    verify's random episode `run` on a level is evaluate's.

    `invalid_rate`: the share of malformed actions (an unknown name, a bogus parameter) it sends
    instead, as check and verify's execution stage do to see an environment survive what agents
    really send; such a fuzzing agent samples even when no action is declared."""

    def __init__(self, space, rng: random.Random, invalid_rate: float = 0.0):
        self.space, self.rng, self.invalid_rate = space, rng, invalid_rate

    @classmethod
    def seeded(cls, space, config, level: str, run: int) -> "RandomAgent":
        meta = config.get("meta") if isinstance(config, dict) else None
        env_id = meta.get("id", "") if isinstance(meta, dict) else ""
        return cls(space, random.Random(f"{env_id}|{level}|{run}"))

    @classmethod
    def for_episode(cls, ctx: EpisodeContext) -> "RandomAgent":
        return cls.seeded(ctx.env.actions, ctx.env.config, ctx.level, ctx.run)

    async def act(self, turn: Turn) -> Decision:
        if not self.space and not self.invalid_rate:
            return Decision(error="stop", message="the environment declares no actions to sample from")
        return Decision(action=self.space.sample(self.rng, self.invalid_rate))


class ActionsAgent:
    """Plays the actions it is given, in order; when they run out, `then` (another agent) takes
    over, or it stops. Verify's planner episodes (the search's witness, then random actions) and
    check's replayed episodes are such agents."""

    def __init__(self, actions, then=None):
        self.actions, self.then = iter(actions), then

    async def act(self, turn: Turn) -> Decision:
        action = next(self.actions, None)
        if action is not None:
            return Decision(action=action)
        if self.then is not None:
            return await self.then.act(turn)
        return Decision(error="stop", message="no actions left to play")


class PlannerAgent:
    """Search over snapshots in the sandbox worker (pipeline/sandbox/inside/search.py, the search verify
    certifies with), then follow the witness: the action sequence that reached the best total.
    The search is counted in nodes, so a run scores the same on an idle and a busy machine; its
    wall-clock limit is only a safety stop, and a plan it cut says so in every thought it
    follows. It stops early once it reaches the level's certified max reward. When the witness
    is used up and the episode goes on (a stochastic environment, a search cut short by its
    budget), it searches again from the current state, up to `replans` times. With nothing left
    to gain, it stops (agent_stopped).

    The plan from a level's start is deterministic, so it is computed once per evaluation and
    shared by every run of that level (`plans`)."""

    replans = 3

    def __init__(self, ctx: EpisodeContext, nodes: int, seconds: float, plans: dict):
        self.ctx, self.nodes, self.seconds, self.plans = ctx, nodes, seconds, plans
        self.plan: list[dict] = []
        self.searches = 0
        self.cut = False  # a search was cut by the safety stop

    async def act(self, turn: Turn) -> Decision:
        if not self.plan:
            if self.searches > self.replans:
                return Decision(error="stop", message=f"no gain found after {self.searches} searches")
            self.plan = list(await self._search(first=turn.step == 1))
            self.searches += 1
            if not self.plan:
                return Decision(error="stop", message="the search found nothing more to gain within its budget")
        thought = f"following the search witness ({len(self.plan) - 1} left)"
        if self.cut:
            thought += (f"; the search was cut by the {self.seconds:g}s safety stop (--planner-seconds), not its "
                        f"node budget: this plan depends on machine load")
        return Decision(action=self.plan.pop(0), thought=thought)

    async def _search(self, first: bool) -> list[dict]:
        if not first:  # mid-episode: the reward still reachable is unknown, so no early stop
            witness, cut = await self._witness(stop_at=None)
        else:
            key = (self.ctx.env.name, self.ctx.level)
            if key not in self.plans:
                shared = asyncio.ensure_future(self._witness(stop_at=self.ctx.max_reward))
                # Every episode awaiting it may be gone (Ctrl-C cancels them, then the pool kills the
                # worker under the search): its outcome is read here so it is never reported unread.
                shared.add_done_callback(lambda f: f.cancelled() or f.exception())
                self.plans[key] = shared
            witness, cut = await asyncio.shield(self.plans[key])
        self.cut = self.cut or cut
        return witness

    async def _witness(self, stop_at: float | None) -> tuple[list[dict], bool]:
        # Horizon: the episode's step limit, so the witness fits in the steps the agent has.
        result = await self.ctx.session.blocking(
            planner.search, self.ctx.session.env, self.ctx.env, max_steps=self.ctx.max_steps, max_nodes=self.nodes,
            seconds=self.seconds, stop_at=stop_at)
        return result.witness, result.cut_by_clock
