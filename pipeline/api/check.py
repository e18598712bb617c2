"""The basic code test of an environment, in the sandbox: the library call under `envforge check`
(and what generate's repair loop reads)."""
from __future__ import annotations

import dataclasses

from envforge.pipeline.api.options import ExecutorOptions, Options, group, option
from envforge.pipeline.api.values import SECONDS, SEED
from envforge.pipeline.check import BUDGET_SECONDS, CheckReport, check_env
from envforge.pipeline.sandbox.outside.executor import running_on


@dataclasses.dataclass(frozen=True)
class CheckOptions(Options):
    seed: int = option(0, SEED, help="seed of the random actions (default {default})")
    budget: float = option(BUDGET_SECONDS, SECONDS, metavar="SECONDS", help="wall clock for the whole check; past "
                           "it the rest is skipped and it fails (default {default})")
    executor: ExecutorOptions = group(ExecutorOptions)


def check(env_dir: str, options: CheckOptions) -> CheckReport:
    """Import, reset on every level, step every action, random episodes, generator, validator and
    determinism, all in the sandbox: the problems found and the figures."""
    with running_on(options.executor.start()):
        return check_env(env_dir, seed=options.seed, budget_seconds=options.budget)
