"""`envforge check`: the basic code test of an environment folder (paper Algorithm 1).

In the spirit of Gymnasium's env checker: it exercises the environment — in the
sandbox — and reports precise problems, each located at a file (and line when the
environment's own code is at fault), as `file:line: expected …, found …`. The repair
loop feeds these messages back to the model, so they must say what to fix.
"""
from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import layout
from pipeline.envfolder.spec import EnvSpec
from pipeline.errors import LocatedError, not_a_folder
from pipeline.evaluate.agents import ActionsAgent, RandomAgent
from pipeline.evaluate.episode import run_episode_sync
from pipeline.located import Problem
from pipeline.sandbox import SandboxLimits, SandboxFailure
from pipeline.sandbox.outside.client import EnvClient, Level
from pipeline.check.static import other_python_files, scan_env

GENERATOR_SEEDS = (1, 2, 3)
GENERATED_START_SEEDS = (101, 102)
FATAL_KINDS = {"wall_clock", "timeout", "cpu_limit", "memory", "crash", "output_limit", "exit", "protocol", "load"}
RANDOM_EPISODES = 3


@dataclass
class CheckReport:
    env_dir: str
    problems: list[Problem] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict:
        return {"env_dir": self.env_dir, "ok": self.ok, "problems": [p.to_dict() for p in self.problems],
                "stats": self.stats}


class _Checker:
    def __init__(self, env: layout.EnvDir, limits: SandboxLimits, seed: int, budget_seconds: float):
        self.env = env
        self.limits = limits
        self.budget_seconds = budget_seconds
        self.deadline = (time.monotonic() + budget_seconds, f"check's budget of {budget_seconds:g}s ran out")
        self.rng = random.Random(seed)
        self.report = CheckReport(str(env.path))
        self.worker: EnvClient | None = None
        self.config: dict = {}
        self.spec: EnvSpec | None = None
        self.stopped = False

    # -- problems --------------------------------------------------------------------
    def problem(self, file: str, expected: str, found: str, check: str, line: int | None = None,
                severity: str = "error", path: str = "") -> None:
        self.report.problems.append(Problem(file, path, expected, found, severity, line, check))

    def failure(self, failure: SandboxFailure, expected: str, check: str, file: str = layout.ENV_MAIN) -> None:
        where, line = file, None
        if failure.where:
            head, _, num = failure.where.rpartition(":")
            where, line = (head, int(num)) if head and num.isdigit() else (failure.where, None)
        found = f"{failure.kind}: {failure.detail}"
        if failure.output.strip() and failure.kind in ("exception", "load", "exit", "crash"):
            found += f" (output: {failure.output.strip()[-300:]!r})"
        self.problem(where, expected, found, check, line)
        self.close_worker()
        if failure.kind in FATAL_KINDS:
            # A hang or a blown limit would recur in every later check: report it once.
            self.stopped = True

    # -- worker ----------------------------------------------------------------------
    def live_worker(self) -> EnvClient | None:
        if self.stopped:
            return None
        if time.monotonic() > self.deadline[0]:
            self.problem(layout.ENV_MAIN, f"check to finish within its budget of {self.budget_seconds:g}s",
                         "wall_clock: still running; the remaining checks were skipped", "budget")
            self.stopped = True
            return None
        if self.worker is None or not self.worker.worker.alive or self.worker.worker.failed:
            self.close_worker()
            try:
                self.worker = EnvClient.start(self.env.path, self.max_steps, self.limits, deadline=self.deadline)
            except SandboxFailure as f:
                self.failure(f, "env_main.py to import and its SkinEnv subclass to instantiate", "load")
                return None
            self.report_dropped(self.worker.worker.dropped)
        return self.worker

    def report_dropped(self, dropped: list[tuple[str, str]]) -> None:
        """Each file the sandbox's copy of the folder left out, said once."""
        for path, what in dropped:
            if not any(p.check == "sandbox_copy" and p.file == path for p in self.report.problems):
                self.problem(path, "a regular file or folder inside the environment folder",
                             f"{what}; the sandbox's copy leaves it out", "sandbox_copy", severity="warning")

    def close_worker(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    # -- the checks, in order --------------------------------------------------------
    def run(self) -> CheckReport:
        started = time.monotonic()
        try:
            if self.check_files():
                for check in (self.check_levels, self.check_actions, self.check_episodes,
                              self.check_generator, self.check_validator, self.check_determinism):
                    if self.live_worker() is None:
                        break
                    check()
        finally:
            self.close_worker()
        self.report.stats["seconds"] = round(time.monotonic() - started, 2)
        return self.report

    def check_files(self) -> bool:
        if not self.env.path.is_dir():
            self.problem(str(self.env.path), "an environment folder", not_a_folder(self.env.path), "layout")
            return False
        for name in self.env.missing_required():
            self.problem(name, "the file to exist", "it is missing", "layout")
        if self.env.missing_required():
            return False
        try:
            self.spec = EnvSpec.open(self.env.path, full_paths=False)
        except LocatedError as e:
            self.report.problems.append(dataclasses.replace(e.problem, check="layout"))
            return False
        self.config = self.spec.config
        self.space = self.spec.actions
        self.check_dsl()
        for problem in scan_env(self.env.path):
            self.report.problems.append(problem)
        self.report.stats["not_imported"] = other_python_files(self.env.path)
        if not self.spec.all_levels() and not self.env.file(layout.ENV_GENERATE).exists():
            self.problem(layout.LEVELS + "/", f"at least one level file (*.yaml) or a generator in {layout.ENV_GENERATE}",
                         "neither", "levels")
        self.report.stats["levels"] = len(self.spec.all_levels())
        self.report.stats["actions"] = len(self.space)
        self.report.stats["action_domains"] = {f"{a}.{p}": source for (a, p), source in self.space.sources.items()}
        if not self.space:
            self.problem(layout.CONFIG, "at least one action under transition.actions", "none", "actions")
        return not any(p.severity == "error" and p.check == "static" for p in self.report.problems)

    def check_dsl(self) -> None:
        """DSL findings are warnings here: `envforge dsl check` is the strict gate."""
        from dsl_schema.check import check_text

        for p in check_text(self.spec.config_text, layout.CONFIG):
            self.report.problems.append(dataclasses.replace(p, file=layout.CONFIG, severity="warning", check="dsl"))

    def episode_starts(self) -> list[Level]:
        """Where episodes start: the shipped levels, else levels generated from fixed seeds
        (a freshly written environment has no level files until verification makes them)."""
        shipped = [Level(file=level) for level in self.spec.all_levels()]
        return shipped or [Level(seed=seed) for seed in GENERATED_START_SEEDS]

    @property
    def max_steps(self) -> int:
        return self.spec.max_steps

    def with_workers(self, items):
        """Each item with a live worker to try it on; ends early when no worker can be had."""
        for item in items:
            worker = self.live_worker()
            if worker is None:
                return
            yield item, worker

    def check_levels(self) -> None:
        for level, worker in self.with_workers(self.spec.all_levels()):
            try:
                first = worker.reset(level)
            except SandboxFailure as f:
                self.failure(f, f"reset on {level} to succeed", "levels")
                continue
            self.check_observation(first.observation, f"the observation after reset on {level}")

    def check_observation(self, observation, what: str) -> None:
        if observation is None or (isinstance(observation, str) and not observation.strip()):
            self.problem(layout.ENV_MAIN, f"{what} to render to non-empty text", repr(observation), "render")

    def check_actions(self) -> None:
        start = self.episode_starts()[0]
        for action, worker in self.with_workers(self.space):
            sent = {"action": action.name, "params": self.space.sample_params(action, self.rng)}
            try:
                worker.reset(start)
                result = worker.step(sent)
            except SandboxFailure as f:
                self.failure(f, f"step({_fmt(sent)}) to succeed", "actions")
                continue
            self.check_observation(result.observation, f"the observation after {action.name}")

    def check_episodes(self) -> None:
        space = self.space
        starts = self.episode_starts()
        truncated = []
        lengths = []
        for i, worker in self.with_workers(range(RANDOM_EPISODES)):
            start = starts[i % len(starts)]
            where = _start_name(start)
            try:
                episode = run_episode_sync(RandomAgent(space, self.rng, invalid_rate=0.2), worker, start, seed=i)
            except SandboxFailure as f:
                self.failure(f, f"a random episode on {where} to run without failure", "episodes")
                continue
            lengths.append(episode.steps)
            if episode.truncated and not episode.ended_at_cap:
                truncated.append(where)
        self.report.stats["random_episode_steps"] = lengths
        if truncated:
            # The runtime truncates the episode at the cap, so this is no fault, but an env whose
            # episodes never end by themselves is worth a look.
            self.problem(layout.ENV_MAIN, f"done() to become true by termination.max_steps={self.max_steps}",
                         f"still running after {self.max_steps} steps on {', '.join(truncated)} (the runtime "
                         f"truncated it)", "episodes", severity="warning")

    def check_generator(self) -> None:
        hashes = {}
        for seed, worker in self.with_workers(GENERATOR_SEEDS + GENERATOR_SEEDS[:1]):
            try:
                result = worker.reset(Level(seed=seed), want_state=True)
            except SandboxFailure as f:
                file = layout.ENV_GENERATE if self.env.file(layout.ENV_GENERATE).exists() else layout.ENV_MAIN
                self.failure(f, f"the generator to make a level for seed {seed}", "generator", file)
                return
            try:
                verdict = worker.validate()  # the state as generated, in this worker (no JSON round trip)
            except SandboxFailure as f:
                self.failure(f, f"the validator to run on the level generated with seed {seed}", "validator",
                             layout.ENV_VALIDATOR)
                return
            if not verdict.ok:
                self.problem(layout.ENV_GENERATE, f"the validator to accept the level generated with seed {seed}",
                             "; ".join(verdict.issues) or "rejected without a reason", "generator")
            if seed in hashes and hashes[seed] != result.state_hash:
                self.problem(layout.ENV_GENERATE, f"the same level for the same seed ({seed})",
                             "a different level on the second call", "generator")
            hashes.setdefault(seed, result.state_hash)
        if len(set(hashes.values())) < len(GENERATOR_SEEDS):
            self.problem(layout.ENV_GENERATE, f"different levels for seeds {list(GENERATOR_SEEDS)}",
                         f"only {len(set(hashes.values()))} distinct level(s)", "generator")
        self.report.stats["generator_seeds"] = len(hashes)

    def check_validator(self) -> None:
        if not self.env.file(layout.ENV_VALIDATOR).exists():
            self.problem(layout.ENV_VALIDATOR, "a level validator", "the file is missing", "validator")
            return
        for level, worker in self.with_workers(self.spec.all_levels()):
            try:
                verdict = worker.validate(level)
            except SandboxFailure as f:
                self.failure(f, f"the validator to run on {level}", "validator", layout.ENV_VALIDATOR)
                return
            if not verdict.ok:
                self.problem(level, "the validator to accept this shipped level",
                             "; ".join(verdict.issues) or "rejected without a reason", "validator")

    def check_determinism(self) -> None:
        start = self.episode_starts()[0]
        plan = [self.space.sample(self.rng) for _ in range(min(self.max_steps, 20))]
        runs = []
        for _, worker in self.with_workers(range(2)):
            try:
                episode = run_episode_sync(ActionsAgent(plan), worker, start, seed=7, limit=len(plan))
            except SandboxFailure as f:
                self.failure(f, "a replayed episode to run", "determinism")
                return
            runs.append(episode)
        first, second = runs
        for i, (a, b) in enumerate(zip(first.observations, second.observations)):
            if a != b or (i and first.rewards[i - 1] != second.rewards[i - 1]):
                self.problem(layout.ENV_MAIN, f"the same observations and rewards for the same level, seed and actions (step {i})",
                             first_difference(a, b) if a != b else
                             f"reward {first.rewards[i - 1]!r} then {second.rewards[i - 1]!r}", "determinism")
                return


# Wall clock for a whole check: an env whose every call stays just under the call limit would
# otherwise keep check busy for (levels + episodes x steps) x 5 s.
BUDGET_SECONDS = 300.0


def check_env(env_dir: str | Path, limits: SandboxLimits | None = None, seed: int = 0,
              budget_seconds: float = BUDGET_SECONDS) -> CheckReport:
    limits = limits or SandboxLimits(call_seconds=5, cpu_seconds=60)
    return _Checker(layout.EnvDir.at(env_dir), limits, seed, budget_seconds).run()


def _start_name(start: Level) -> str:
    return start.file or f"the level generated from seed {start.seed}"


def _fmt(action: dict) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in action.get("params", {}).items())
    return f"{action['action']}({params})"


def first_difference(a, b, context: int = 30) -> str:
    """Where two observations first differ, with a little text around it from each."""
    a, b = str(a), str(b)
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    line = a.count("\n", 0, at) + 1
    start = max(0, at - context)

    def excerpt(text: str) -> str:
        return ("…" if start else "") + text[start:at + context] + ("…" if len(text) > at + context else "")
    return f"they first differ at character {at} (line {line}): {excerpt(a)!r} then {excerpt(b)!r}"
