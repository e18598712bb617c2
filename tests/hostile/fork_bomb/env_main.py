"""Hostile env: step forks; the child would sleep, the parent fork again. Expected: exception (fork
refused).
"""
import os
import time

from pipeline.runtime import SkinEnv

# Hidden from the static scan: the sandbox itself must refuse the fork.
_fork = getattr(os, "fo" + "rk")


class ForkBomb(SkinEnv):
    def transition(self, action):
        for _ in range(64):
            if _fork() == 0:
                time.sleep(3600)
        return self._state

    def reward(self, action):
        return 0.0, [], {}
