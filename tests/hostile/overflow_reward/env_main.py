"""Hostile env: every step pays a finite reward near the largest float (the level's `pay`), so
the second step's running total is ±inf on the host. Expected: the episode ends with the stop
reason invalid_reward (an environment fault, left out of the scores), and every record and
report is strict JSON."""
from pipeline.runtime import SkinEnv


class OverflowReward(SkinEnv):
    def transition(self, action):
        return self._state

    def reward(self, action):
        return float(self._state["pay"]), [], {}
