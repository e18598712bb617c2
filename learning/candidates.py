"""Candidates and their pool (AutoEnv §4.1): the versions of an agent a learning run makes.

A candidate holds its components — `prompt`, the agent's instruction text, and `agent_code`,
the source of an agent class run in the sandbox (None: the built-in ReAct agent) — and its
metadata: parent, iteration, the analysis that produced it, what making it cost (`spent`), and one
evaluation per split (train: the levels of its iteration; test: the fixed test levels), each with
its metrics and the folder of its episode records and trajectories.

The pool of one run (one environment, one method) is saved as pool.json after every change,
with a person's view next to it: candidates/<id>/ (prompt.txt, agent.py, analysis.txt) and
lineage.md (the tree, the metrics, and each candidate's change as a diff against its parent).
"""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from envforge.pipeline import records as files
from envforge.pipeline.evaluate.hosted import SEED_SOURCE
from envforge.pipeline.kinds import PoolRecord

COMPONENTS = ("prompt", "agent_code")
POOL_JSON, LINEAGE_MD, CANDIDATES = "pool.json", "lineage.md", "candidates"
# A candidate is "new" until its training evaluation is complete, then "evaluated"; "rejected"
# when its optimization produced nothing runnable (it keeps its place in the lineage).
STATUSES = ("new", "evaluated", "rejected")
SEED_AGENT = SEED_SOURCE  # where agent_code starts: envforge's ReAct agent (pipeline/evaluate/react.py)


def agent_source(components: "Components") -> str:
    """The agent code a candidate runs: its own, or the seed's when it still uses the built-in agent."""
    return components.agent_code if components.agent_code is not None else SEED_AGENT.read_text(encoding="utf-8")


@dataclass
class Components:
    prompt: str
    agent_code: str | None = None  # None: the built-in ReAct agent (pipeline/evaluate/react.py)

    def get(self, name: str) -> str | None:
        return getattr(self, name)


@dataclass
class Metrics:
    reward: float | None  # mean normalized reward over the scored episodes
    std: float | None  # over runs
    episodes: int
    scored: int
    steps: float | None  # mean turns per episode
    tokens: int  # input + output, all episodes
    dollars: float
    calls: int
    stop_reasons: dict = field(default_factory=dict)

    @property
    def cost(self) -> float:
        """The cost axis of Pareto selection: model tokens per episode (dollars are proportional
        to tokens for one execution model, and tokens are known under replay and for unpriced models)."""
        return self.tokens / self.episodes if self.episodes else 0.0


@dataclass
class CandidateEvaluation:
    split: str  # "train" or "test"
    iteration: int
    levels: list[str]  # level ids: "seed:N" (generated) or "levels/level_01.yaml"
    records: str  # folder of episodes.jsonl and trajectories/, relative to the study folder
    metrics: Metrics


@dataclass
class Candidate:
    id: str
    iteration: int
    parent: str | None
    components: Components
    changed: str | None = None  # the component its optimization rewrote
    analysis: str = ""  # the signal's analysis of the parent's trajectories
    status: str = "new"
    rejection: str = ""
    spent: dict = field(default_factory=lambda: {"tokens": 0, "dollars": 0.0, "calls": 0})  # on its optimization
    evaluations: dict[str, CandidateEvaluation] = field(default_factory=dict)

    @property
    def train(self) -> Metrics | None:
        evaluation = self.evaluations.get("train")
        return evaluation.metrics if evaluation else None

    @property
    def reward(self) -> float | None:
        return self.train.reward if self.train else None

    @property
    def cost(self) -> float:
        """Selection's cost axis: training tokens per episode (Metrics.cost)."""
        return self.train.cost if self.train else 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Candidate":
        evaluations = {k: CandidateEvaluation(**{**v, "metrics": Metrics(**v["metrics"])})
                       for k, v in data["evaluations"].items()}
        return cls(**{**data, "components": Components(**data["components"]), "evaluations": evaluations})


@dataclass
class Pool:
    """The candidates of one learning run, in the order they were made."""

    env: str
    method: str
    folder: Path
    candidates: list[Candidate] = field(default_factory=list)
    iterations_done: int = 0
    counters: dict[str, int] = field(default_factory=dict)  # model calls made per stage (see learning.calls)
    final: str | None = None  # the candidate reported on the test levels
    stopped: str = ""  # why the run stopped before its last iteration

    def get(self, cid: str) -> Candidate:
        return next(c for c in self.candidates if c.id == cid)

    def new_id(self) -> str:
        return f"c{len(self.candidates)}"

    def add(self, candidate: Candidate) -> Candidate:
        self.candidates.append(candidate)
        return candidate

    def scored(self, before: int) -> list[Candidate]:
        """Candidates of iterations before `before` with a training score: what selection sees."""
        return [c for c in self.candidates if c.iteration < before and c.status == "evaluated" and c.reward is not None]

    def children(self, parent: str, iteration: int) -> list[Candidate]:
        return [c for c in self.candidates if c.parent == parent and c.iteration == iteration]

    def lineage(self, cid: str) -> list[str]:
        """Ids from the seed candidate down to `cid`."""
        path = [cid]
        while (parent := self.get(path[-1]).parent) is not None:
            path.append(parent)
        return path[::-1]

    # -- persistence ------------------------------------------------------------------
    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        files.write(self.folder / POOL_JSON, PoolRecord(self.env, self.method, self.iterations_done, self.counters,
                                                        self.final, self.stopped,
                                                        [c.to_dict() for c in self.candidates]), indent=1)
        for c in self.candidates:
            _write_components(self.folder / CANDIDATES / c.id, c)
        files.write_text(self.folder / LINEAGE_MD, lineage_markdown(self))

    @classmethod
    def load(cls, folder: Path) -> "Pool":
        data = files.read(folder / POOL_JSON, PoolRecord)
        return cls(data.env, data.method, folder, [Candidate.from_dict(c) for c in data.candidates],
                   data.iterations_done, data.counters, data.final, data.stopped)

    @classmethod
    def open(cls, folder: Path, env: str, method: str) -> "Pool":
        return cls.load(folder) if (folder / POOL_JSON).is_file() else cls(env, method, folder)


def _write_components(folder: Path, c: Candidate) -> None:
    texts = {"prompt.txt": c.components.prompt, "agent.py": c.components.agent_code, "analysis.txt": c.analysis or None}
    for name, text in texts.items():
        if text is not None and not ((folder / name).is_file() and (folder / name).read_text(encoding="utf-8") == text):
            files.write_text(folder / name, text)


def lineage_markdown(pool: Pool) -> str:
    lines = [f"# {pool.env} / {pool.method}: candidate lineage", "",
             "| candidate | parent | iteration | changed | status | train reward | tokens/episode | test reward |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in pool.candidates:
        test = c.evaluations.get("test")
        lines.append(f"| {c.id}{' (final)' if c.id == pool.final else ''} | {c.parent or '–'} | {c.iteration} | "
                     f"{c.changed or '–'} | {c.status}{': ' + c.rejection if c.rejection else ''} | "
                     f"{_pct(c.reward)} | {c.cost:.0f} | {_pct(test.metrics.reward) if test else '–'} |")
    for c in pool.candidates:
        if c.parent is None or c.changed is None:
            continue
        parent = pool.get(c.parent).components
        before = agent_source(parent) if c.changed == "agent_code" else parent.prompt
        diff = difflib.unified_diff(before.splitlines(), (c.components.get(c.changed) or "").splitlines(),
                                    f"{c.parent}/{c.changed}", f"{c.id}/{c.changed}", lineterm="", n=1)
        lines += ["", f"## {c.id} from {c.parent} (iteration {c.iteration}): {c.changed}", "", "```diff", *diff, "```"]
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.2f}"
