"""`envforge check`: the basic code test of an environment folder (paper Algorithm 1).

In the spirit of Gymnasium's env checker: it exercises the environment — in the
sandbox — and reports precise problems, each located at a file (and line when the
environment's own code is at fault), as `file:line: expected …, found …`. The repair
loop feeds these messages back to the model, so they must say what to fix.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from envforge.pipeline import layout
from envforge.pipeline.check import checks
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.located import Problem
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

FATAL_KINDS = {"wall_clock", "timeout", "cpu_limit", "memory", "disk_quota", "crash", "output_limit", "exit",
               "protocol", "load"}


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


class Checker:
    """One check of one folder: its report, its worker and its budget; the checks themselves are
    checks.py's functions, run in order by `run`."""

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
                self.worker = EnvClient.start(self.spec, self.limits, deadline=self.deadline)
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

    # -- running the checks, in order ------------------------------------------------
    def run(self) -> CheckReport:
        started = time.monotonic()
        try:
            if checks.files(self):
                for check in checks.IN_A_WORKER:
                    if self.live_worker() is None:
                        break
                    check(self)
        finally:
            self.close_worker()
        self.report.stats["seconds"] = round(time.monotonic() - started, 2)
        return self.report


# Wall clock for a whole check: an env whose every call stays just under the call limit would
# otherwise keep check busy for (levels + episodes x steps) x 5 s.
BUDGET_SECONDS = 300.0


def check_env(env_dir: str | Path, limits: SandboxLimits | None = None, seed: int = 0,
              budget_seconds: float = BUDGET_SECONDS) -> CheckReport:
    limits = limits or SandboxLimits(call_seconds=5, cpu_seconds=60)
    return Checker(layout.EnvDir.at(env_dir), limits, seed, budget_seconds).run()
