"""Evaluation (AutoEnv §4.2, F_e): a candidate plays levels through pipeline.evaluate — the same
episode loop, limits, records and trajectories as `envforge evaluate` — and its metrics are the
aggregates of its episode records (normalized reward, tokens, dollars, steps).

Training levels are made fresh for every iteration: the environment's generator with new seeds
(SEED_BASE + SEED_STRIDE·iteration + i), each level accepted by the env's validator, unlike every
test and validation level and every other training level, and given a max reward certified by
search exactly as `envforge verify` certifies one (pipeline.levelmax.certify), by the level
factory verify's levels stage makes its levels with (pipeline/levelfactory.py, `OneByOne`). All methods
meet the same levels at a given iteration: they are compared on equal terms, and each level is
certified once (levels/<env>/iteration_NN.json). The test levels are the environment's levels/
(the first --test-levels of them): fixed, never seen during learning.

An evaluation is all or nothing: its folder is emptied before it starts, and it counts once it
is complete (a budget cap that stops it raises BudgetStop and it is redone on resume).
"""
from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from envforge.learning.calls import ACT, StageClient
from envforge.learning.candidates import CANDIDATES, Candidate, CandidateEvaluation, Metrics
from envforge.learning.settings import Settings
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate import make_player
from envforge.pipeline.evaluate.hosted import code_player, write_code
from envforge.pipeline.evaluate.records import Records
from envforge.pipeline.evaluate.report import summarize
from envforge.pipeline.evaluate.runner import RunOptions, evaluate
from envforge.pipeline.kinds import IterationLevels, TrainingLevel
from envforge.pipeline.levelfactory import GeneratorFailed, LevelFactory, OneByOne
from envforge.pipeline.levelmax import Search
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits, WorkerPool
from envforge.pipeline.sandbox.outside.client import EnvClient, Level

SEED_BASE, SEED_STRIDE = 100_000, 1_000
SEEDS_PER_LEVEL = 10  # seeds tried per training level wanted before giving up
SANDBOX = SandboxLimits(call_seconds=10.0, cpu_seconds=3600)
EPISODES = "episodes"


class BudgetStop(Exception):
    """A budget cap stopped an evaluation or an optimization call."""


class TrainingLevels:
    def __init__(self, out: Path, settings: Settings):
        self.out, self.count, self.last = out, settings.train_levels, settings.iterations
        # Each search is bounded by its own nodes and safety stop: learn has no --budget (verify's).
        self.nodes, self.seconds = settings.search_nodes, settings.search_seconds
        self._made: dict[tuple[str, int], asyncio.Future] = {}

    async def get(self, target: EnvSpec, iteration: int) -> EnvSpec:
        """`target` with iteration `iteration`'s levels as its "train" split; the next iteration's are
        made meanwhile, in the background."""
        for t in (iteration, iteration + 1):
            if (target.name, t) not in self._made and t <= self.last:
                self._made[target.name, t] = asyncio.ensure_future(asyncio.to_thread(self._load_or_make, target, t))
        levels = await asyncio.shield(self._made[target.name, iteration])
        return target.with_levels("train", [Level.parse(lv.source) for lv in levels],
                                  {Level.parse(lv.source): lv.max_reward for lv in levels})

    def path(self, env: str, iteration: int) -> Path:
        return self.out / "levels" / env / f"iteration_{iteration:02d}.json"

    def _load_or_make(self, target: EnvSpec, iteration: int) -> list[TrainingLevel]:
        path = self.path(target.name, iteration)
        if path.is_file():
            return files.read(path, IterationLevels).levels
        levels = self._make(target, iteration)
        files.write(path, IterationLevels(target.name, iteration, levels), indent=1)
        return levels

    @staticmethod
    def worker(target: EnvSpec):
        """The worker training levels are made and certified in: no wall-clock deadline (the
        searches bound themselves), the sandbox limits of learn's evaluations."""
        return EnvClient.open(target, SANDBOX)

    def _make(self, target: EnvSpec, iteration: int) -> list[TrainingLevel]:
        first_seed = SEED_BASE + SEED_STRIDE * iteration
        seeds = range(first_seed, first_seed + self.count * SEEDS_PER_LEVEL)
        try:
            with self.worker(target) as worker:
                shipped = {worker.reset(lv).state_hash for lv in target.dir.all_levels()}
                certifier = OneByOne(Search(target, self.nodes, self.seconds), worker)
                made = LevelFactory(worker, seeds, certifier).make(self.count, exclude=shipped)
        except GeneratorFailed as e:
            raise UserError(
                f"{target.name}: expected the generator to make training levels, found {e.failure}"
            ) from None
        except SandboxFailure as e:
            raise UserError(f"{target.name}: expected the generator to make training levels, found {e}") from None
        kept = [TrainingLevel(str(Level(seed=lm.seed)), lm.seed, lm.state_hash, lm.max_reward, lm.calculation_method)
                for lm in made.kept]
        if len(kept) < self.count:
            raise UserError(f"{target.name}: expected {self.count} fit training levels from seeds {first_seed}.."
                            f"{seeds[-1]}, found {len(kept)}")
        return kept


def metrics_of(records: Records) -> Metrics:
    rows = records.all()
    summary = summarize(rows)
    s = next(iter(summary[0].envs.values())) if summary else None
    return Metrics(reward=s.mean_normalized if s else None, std=s.std if s else None,
                   episodes=s.episodes if s else 0, scored=s.scored if s else 0, steps=s.mean_steps if s else None,
                   tokens=(s.tokens_in + s.tokens_out) if s else 0, dollars=s.dollars if s else 0.0,
                   calls=sum(r.model_calls for r in rows), stop_reasons=s.stop_reasons if s else {})


@dataclass
class Evaluator:
    out: Path  # the study folder
    client: object  # the execution model's LLMClient
    settings: Settings
    envs: WorkerPool  # environment workers, shared by every evaluation of the study
    agents: WorkerPool  # agent_code workers
    sequential: bool  # recording or replaying: one episode at a time, so calls keep their order

    async def __call__(self, candidate: Candidate, target: EnvSpec, split: str, iteration: int, run: Path,
                       theme: str, counters: dict[str, int]) -> CandidateEvaluation:
        """Play `candidate` on `target`'s levels of `split`; records go to run/episodes/<id>-<split>/."""
        folder = run / EPISODES / f"{candidate.id}-{split}"
        if folder.exists():
            shutil.rmtree(folder)  # what an interrupted evaluation left: it starts over
        client = StageClient(self.client, theme, ACT, counters)
        s = self.settings
        max_levels = s.test_levels if split == "test" else None
        options = RunOptions(candidate.id, self.client.spec, s.runs, split, max_levels,
                             1 if self.sequential else s.concurrency, s.limits, SANDBOX)
        records = Records(folder)
        outcome = await evaluate([target], self._player(candidate, client, run), options, records, pool=self.envs)
        records.rewrite_csv()
        if outcome.budget_message:
            raise BudgetStop(outcome.budget_message)
        levels = [str(level) for level in target.levels(split, max_levels)]  # records keep a level as its text
        return CandidateEvaluation(split, iteration, levels, str(folder.relative_to(self.out)), metrics_of(records))

    def _player(self, candidate: Candidate, client: StageClient, run: Path):
        c = candidate.components
        if c.agent_code is None:
            return make_player("react", client=client, model_options=self.settings.model_options, instruction=c.prompt)
        code = write_code(run / CANDIDATES / candidate.id, c.agent_code)
        return code_player(code, c.prompt, client, self.settings.model_options, self.agents)
