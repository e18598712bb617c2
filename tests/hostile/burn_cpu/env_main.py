"""Hostile env: each step burns CPU (the level says how many seconds), so a worker reused across
leases would run out of CPU in someone else's lease. Expected: the pool counts the worker's CPU
over its life and does not hand out one that used most of it.
"""
import time

from pipeline.runtime import SkinEnv


class BurnCpu(SkinEnv):
    def transition(self, action):
        until = time.process_time() + self._state["burn"]
        while time.process_time() < until:
            pass
        return self._state

    def reward(self, action):
        return 0.0, [], {}
