"""Running an agent on probe items and reporting accuracy per kind and per k, with random baselines.

    report = run_probes(read_items("crate_dock.predict.jsonl"), "random")
    print(report.table())

Predict: accuracy (1 for the true candidate), random baseline 1 / candidates. Plan: the agent's
plan is executed in a sandbox worker from the item's start; success when the observation after its
last action meets the target, efficiency = planner length / agent length (0 on failure); random
baseline = random plans of the planner's length (measured when the item was made). Change: the
WorldTest score of the step the agent named (items.score_change), random baseline = the mean
score of a uniformly random step.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import LocatedError, UserError
from envforge.pipeline.kinds import ProbeScores
from envforge.pipeline.llm import LLMClient
from envforge.pipeline.probe.agents import ProbeAgent, make_agent
from envforge.pipeline.probe.items import (
    ChangeItem,
    Item,
    PlanItem,
    PredictItem,
    random_change,
    random_predict,
    score_change,
    score_plan,
    score_predict,
)
from envforge.pipeline.probe.variant_env import meets
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient


@dataclass
class ProbeReport:
    agent: str
    rows: list[dict] = field(default_factory=list)  # one per item

    def groups(self) -> list[dict]:
        """Per environment and kind, and per k for predict: items, score, random baseline (and,
        for plan, efficiency; for change, the share of items where a change was reported)."""
        buckets: dict[tuple, list[dict]] = defaultdict(list)
        for row in self.rows:
            buckets[(row["env"], row["kind"], "all")].append(row)
            if row["kind"] == "predict":
                buckets[(row["env"], row["kind"], row["k"])].append(row)
        out = []
        for (env, kind, k), rows in sorted(buckets.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
            group = {"env": env, "kind": kind, "k": k, "items": len(rows), "score": _mean(rows, "score"),
                     "random": _mean(rows, "random")}
            if kind == "plan":
                group["efficiency"] = _mean(rows, "efficiency")
            if kind == "change":
                group["reported"] = _mean([{"x": float(r["t"] is not None)} for r in rows], "x")
            out.append(group)
        return out

    def record(self) -> ProbeScores:
        """What probes-AGENT.json holds (and --json prints)."""
        return ProbeScores(self.agent, self.groups(), self.rows)

    def table(self) -> str:
        lines = [f"agent: {self.agent}", "",
                 "| env | kind | k | items | score | random | plan efficiency |",
                 "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for g in self.groups():
            efficiency = f"{g['efficiency']:.2f}" if "efficiency" in g else ""
            lines.append(f"| {g['env']} | {g['kind']} | {g['k']} | {g['items']} | {g['score']:.3f} | "
                         f"{g['random']:.3f} | {efficiency} |")
        return "\n".join(lines)


async def score_items(items: list[Item], agent: ProbeAgent, limits: SandboxLimits | None = None,
                      env_dirs: dict[str, str] | None = None) -> ProbeReport:
    """Pose every item to `agent` and score it. `env_dirs` maps env names to folders, for plan
    items whose folder has moved since they were made."""
    report = ProbeReport(agent.name)
    workers: dict[tuple, EnvClient] = {}
    stack = contextlib.ExitStack()
    try:
        for item in items:
            row = {"id": item.id, "env": item.env, "kind": item.kind, "skin": item.skin}
            if isinstance(item, PredictItem):
                choice = await agent.choose(item)
                row.update(k=item.k, choice=choice, score=score_predict(item, choice), random=random_predict(item))
            elif isinstance(item, PlanItem):
                plan = await agent.plan(item)
                key = ((env_dirs or {}).get(item.env, item.env_dir), item.skin)
                if key not in workers:
                    try:
                        spec = EnvSpec.open(key[0], full_paths=False).playable()
                    except LocatedError as e:
                        raise UserError(f"plan item {item.id}: {e}") from None
                    workers[key] = stack.enter_context(EnvClient.open(spec, limits, skin=item.skin))
                reached, steps = execute_plan(workers[key], item, plan)
                success, efficiency = score_plan(item, reached, steps)
                row.update(plan_length=len(plan), steps=steps, score=success, efficiency=efficiency,
                           random=item.random_success)
            elif isinstance(item, ChangeItem):
                t = None
                for seen in range(1, len(item.actions) + 1):
                    t = await agent.notice(item, seen)
                    if t is not None:
                        break
                row.update(t=t, t_star=item.t_star, score=score_change(t, item.t_star), random=random_change(item))
            report.rows.append(row)
    finally:
        stack.close()
    return report


def execute_plan(worker: EnvClient, item: PlanItem, plan: list[dict]) -> tuple[bool, int]:
    """Play the plan from the item's start (at most max_length actions; stopping where the episode
    ends): (whether the last observation meets the target, steps played)."""
    last = worker.reset(item.start.level, item.start.seed, want_state=True)
    for action in item.start.prefix:
        last = worker.step(action, want_state=True)
    steps = 0
    for action in plan[:item.max_length]:
        if not isinstance(action, dict):
            action = {"action": str(action), "params": {}}
        last = worker.step(action, want_state=True)
        steps += 1
        if last.done:
            break
    return meets(last.raw_obs, item.target), steps


def run_probes(
    items: list[Item],
    agent: str | ProbeAgent = "random",
    client: LLMClient | None = None,
    seed: int = 0,
    limits: SandboxLimits | None = None,
    env_dirs: dict[str, str] | None = None,
) -> ProbeReport:
    """Synchronous entry: `agent` is "random", "oracle", a model agent name (needs `client`) or a ProbeAgent.
    From async code (a model client's event loop) await `score_items` instead."""
    if isinstance(agent, str):
        agent = make_agent(agent, client, seed)
    return asyncio.run(score_items(items, agent, limits, env_dirs))


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0
