"""Hostile env: step aims every call that reaches another process at the pids of target.json (see
reach.py); observe(want_state=True) returns what each got. Expected on every rung: EPERM for each,
the targets' limits, priorities, scheduling and SysV segment unchanged, and calls on itself working.
"""
from reach import attempts

from pipeline.runtime import SkinEnv


class ReachProcesses(SkinEnv):
    def transition(self, action):
        self._state["found"] = attempts()
        return self._state

    def reward(self, action):
        return 0.0, [], {}
