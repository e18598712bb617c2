"""Hostile env: step never returns. Expected: timeout."""
from pipeline.runtime import SkinEnv


class InfiniteLoop(SkinEnv):
    def transition(self, action):
        while True:
            self._state["n"] += 1

    def reward(self, action):
        return 0.0, [], {}
