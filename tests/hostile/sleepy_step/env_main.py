"""Hostile env: every step sleeps (in the real env, just under the per-call limit), so no call ever
times out while a whole check would take (levels + episodes x steps) x the sleep. Expected: check
stops at its total wall-clock budget and says so (wall_clock).
"""
import time

from pipeline.runtime import SkinEnv


class SleepyStep(SkinEnv):
    def transition(self, action):
        time.sleep(self._state["sleep"])
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 0.0, [], {}
