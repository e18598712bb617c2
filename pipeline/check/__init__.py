"""`envforge check`: the basic code test of an environment folder, and the static scan of its source.

  checker  check_env and Checker: one check's report, worker and budget; runs the checks in order
  checks   the checks, one function each (files, levels, actions, episodes, generator, validator,
           determinism)
  static   the static scan: calls an environment has no business making, named file:line
"""
from envforge.pipeline.check.checker import BUDGET_SECONDS, CheckReport, check_env

__all__ = ["BUDGET_SECONDS", "CheckReport", "check_env"]
