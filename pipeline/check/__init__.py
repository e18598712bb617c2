"""`envforge check`: the basic code test of an environment folder, and the static scan of its source.

  checker  check_env: exercises the environment in the sandbox and reports located problems
  static   the static scan: calls an environment has no business making, named file:line
"""
from pipeline.check.checker import BUDGET_SECONDS, CheckReport, check_env

__all__ = ["BUDGET_SECONDS", "CheckReport", "check_env"]
