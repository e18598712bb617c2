"""A learning study: every method on every environment, their shared baseline, the report.

    OUT/study.json                         environments, methods, settings, models (for --resume)
    OUT/levels/<env>/iteration_NN.json     the training levels of each iteration
    OUT/runs/<env>/baseline/               c0 on iteration 0's training levels and on the test levels
    OUT/runs/<env>/<method>/pool.json      the run's candidates with lineage (+ lineage.md, candidates/)
    OUT/runs/<env>/<method>/episodes/      records and trajectories of every evaluation
    OUT/runs/<env>/<method>/best/          the final candidate, for `evaluate --agent learned:PATH`
    OUT/report/                            table5.md, table5.csv, figure3.png, results.json

Runs of different (environment, method) pairs go on side by side; the baselines come first, as
every run starts from its environment's c0. A budget cap or a failed model call stops the runs
it reaches (the others go on); what was done stays in the pools, and --resume continues it.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable

from envforge.learning.calls import theme
from envforge.learning.candidates import POOL_JSON, Pool
from envforge.learning.evaluation import SANDBOX, BudgetStop, Evaluator, TrainingLevels
from envforge.learning.layout import BASELINE, REPORT, RUNS, STUDY_JSON
from envforge.learning.learner import LearnerRun, Tools, baseline_run, learn
from envforge.learning.methods import Method
from envforge.learning.optimization import Optimizer
from envforge.learning.report import write_report
from envforge.learning.results import collect
from envforge.learning.settings import Settings
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.hosted import AGENT_LIMITS
from envforge.pipeline.kinds import Study
from envforge.pipeline.llm import BudgetExceeded, LLMError
from envforge.pipeline.sandbox import WorkerPool


@dataclass
class StudyOutcome:
    stopped: dict[str, str] = field(default_factory=dict)  # "env method" -> why it stopped early
    report: list[Path] = field(default_factory=list)
    by_budget: set[str] = field(default_factory=set)  # of those, the ones a budget cap stopped

    @property
    def budget(self) -> bool:
        """A budget cap stopped a run (learn exits 3), as the exception that stopped it said."""
        return bool(self.by_budget)


def open_study(out: Path, study: Study, resume: bool) -> Study:
    """The study's description: `data` for a new one; with --resume, the saved one (a study goes
    on as it was started). Without --resume, a folder holding a study is refused."""
    path = out / STUDY_JSON
    if path.is_file():
        saved = files.read(path, Study)
        if resume:
            return saved
        changed = sorted(f.name for f in fields(Study) if getattr(saved, f.name) != getattr(study, f.name))
        if changed:
            raise UserError(f"{out} holds a study with other {', '.join(changed)}: pass --resume to continue it "
                            f"as it was, or choose another --out")
        raise UserError(f"{out} holds a study ({STUDY_JSON}): pass --resume to continue it, or choose another --out")
    if resume:
        raise UserError(f"--resume: expected a study in {out} ({STUDY_JSON}), found none")
    files.write(path, study, indent=1)
    return study


async def run_study(out: Path, targets: list[EnvSpec], methods: list[Method], settings: Settings, client,
                    optimizer_client, sequential: bool, say: Callable[[str], None] = print) -> StudyOutcome:
    envs = WorkerPool(size=settings.concurrency, limits=SANDBOX)
    agents = WorkerPool(size=settings.concurrency, limits=AGENT_LIMITS, host="agent")
    tools = Tools(settings, Optimizer(optimizer_client, out, settings, agents),
                  Evaluator(out, client, settings, envs, agents, sequential), TrainingLevels(out, settings), say)
    outcome = StudyOutcome()
    try:
        baselines = {t.name: Pool.open(out / RUNS / t.name / BASELINE, t.name, BASELINE) for t in targets}
        await asyncio.gather(*(_guarded(outcome, f"{t.name} {BASELINE}", baselines[t.name], say,
                                        baseline_run(t, baselines[t.name], tools, theme(t.name, BASELINE)))
                               for t in targets))
        runs = [LearnerRun(t, m, Pool.open(out / RUNS / t.name / m.name, t.name, m.name), theme(t.name, m.name))
                for t in targets for m in methods if f"{t.name} {BASELINE}" not in outcome.stopped]
        await asyncio.gather(*(_guarded(outcome, f"{r.env.name} {r.method.name}", r.pool, say,
                                        learn(r, tools, baselines[r.env.name])) for r in runs))
    finally:
        await asyncio.to_thread(envs.close)
        await asyncio.to_thread(agents.close)
    results = collect(out, targets, methods, settings, client.spec, optimizer_client.spec)
    outcome.report = write_report(out / REPORT, results)
    return outcome


async def _guarded(outcome: StudyOutcome, name: str, pool: Pool, say: Callable[[str], None], work) -> None:
    """Run `work`; a budget cap or a failed model call stops this run only, and is recorded."""
    try:
        await work
        pool.stopped = ""
    except (BudgetStop, BudgetExceeded) as e:
        pool.stopped = f"budget: {e}"
        outcome.by_budget.add(name)
    except LLMError as e:
        pool.stopped = f"model: {type(e).__name__}: {e}"
    if pool.stopped:
        outcome.stopped[name] = pool.stopped
        say(f"{name}: stopped ({pool.stopped})")
    if (pool.folder / POOL_JSON).is_file() or pool.candidates:
        pool.save()
