"""The learning loop of one environment and one method: AutoEnv's Algorithm 2.

    P <- {c0}                                     c0 and its scores are the study's baseline
    for t = 1 .. T:
        C_sel <- F_s(P)                           selection over the candidates scored before t
        for c in C_sel:
            c' <- F_o(c)                          optimization: signal -> analysis -> rewrite
            c'.metrics <- F_e(c', E_t)            evaluation on iteration t's fresh training levels
        P <- P + C_new
    final <- the best of P by training reward; it alone plays the fixed test levels; exported

The pool is saved after every optimization and every evaluation, and a resumed run takes up
where the pool stops: a parent already optimized at t is not optimized again, a candidate
already evaluated is not evaluated again.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from envforge.learning.candidates import Candidate, Components, Pool
from envforge.learning.evaluation import Evaluator, TrainingLevels
from envforge.learning.export import export
from envforge.learning.methods import Method
from envforge.learning.optimization import Optimizer
from envforge.learning.selection import SELECTIONS, best
from envforge.learning.settings import Settings
from envforge.pipeline.envfolder.spec import EnvSpec

BEST_FOLDER = "best"


@dataclass
class Tools:
    """What every run of a study shares."""

    settings: Settings
    optimize: Optimizer
    evaluate: Evaluator
    levels: TrainingLevels
    say: Callable[[str], None]


@dataclass
class LearnerRun:
    env: EnvSpec
    method: Method
    pool: Pool
    theme: str  # the (env, method) key of its model calls: learning.calls

    @property
    def folder(self) -> Path:
        return self.pool.folder


async def learn(run: LearnerRun, tools: Tools, baseline: Pool) -> None:
    pool, method, settings = run.pool, run.method, tools.settings
    if not pool.candidates:
        pool.add(copy.deepcopy(baseline.get("c0"))).evaluations.pop("test", None)
    for t in range(pool.iterations_done + 1, settings.iterations + 1):
        for parent in SELECTIONS[method.selection](pool.scored(before=t), settings.max_parents):
            child = next(iter(pool.children(parent.id, t)), None)
            if child is None:
                child = pool.add(await tools.optimize(parent, method, t, pool, run.env, run.folder, run.theme))
                pool.save()
            if child.status == "new":
                levels = await tools.levels.get(run.env, t)
                child.evaluations["train"] = await tools.evaluate(child, levels, "train", t, run.folder, run.theme,
                                                                  pool.counters)
                child.status = "evaluated"
                pool.save()
                tools.say(
                    f"{run.env.name} {method.name} iteration {t}: {child.id} from {parent.id} ({method.component}) "
                    f"scores {_pct(child.reward)} on training levels (parent {_pct(parent.reward)})"
                )
            elif child.status == "rejected":
                tools.say(f"{run.env.name} {method.name} iteration {t}: {child.id} from {parent.id} rejected: "
                          f"{child.rejection}")
        pool.iterations_done = t
        pool.save()
    await finish(run, tools, baseline)


async def finish(run: LearnerRun, tools: Tools, baseline: Pool) -> None:
    """The final candidate (best training reward) on the test levels, and its export."""
    pool = run.pool
    final = best(pool.scored(before=tools.settings.iterations + 1))
    if not final:
        return
    candidate = final[0]
    if "test" not in candidate.evaluations:
        if candidate.id == "c0":
            candidate.evaluations["test"] = baseline.get("c0").evaluations["test"]
        else:
            candidate.evaluations["test"] = await tools.evaluate(candidate, run.env, "test", pool.iterations_done,
                                                                 run.folder, run.theme, pool.counters)
    pool.final = candidate.id
    pool.save()
    export(pool, run.folder / BEST_FOLDER, tools.evaluate.client.spec)
    tools.say(f"{run.env.name} {run.method.name}: final {candidate.id} (iteration {candidate.iteration}) scores "
              f"{_pct(candidate.evaluations['test'].metrics.reward)} on the test levels")


async def baseline_run(env: EnvSpec, pool: Pool, tools: Tools, theme: str) -> None:
    """c0 — the environment's own instruction, the built-in ReAct agent — on iteration 0's training
    levels (what every method's selection starts from) and on the test levels (the IO row)."""
    if not pool.candidates:
        pool.add(Candidate("c0", 0, None, Components(env.instruction)))
    c0 = pool.get("c0")
    if "train" not in c0.evaluations:
        c0.evaluations["train"] = await tools.evaluate(c0, await tools.levels.get(env, 0), "train", 0, pool.folder,
                                                       theme, pool.counters)
        c0.status = "evaluated"
        pool.save()
    if "test" not in c0.evaluations:
        c0.evaluations["test"] = await tools.evaluate(c0, env, "test", 0, pool.folder, theme, pool.counters)
        pool.save()
    pool.final = "c0"
    pool.save()
    tools.say(f"{env.name} baseline: c0 scores {_pct(c0.reward)} on training levels, "
              f"{_pct(c0.evaluations['test'].metrics.reward)} on the test levels")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.2f}%"
