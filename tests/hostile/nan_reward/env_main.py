"""Hostile env: reward is NaN. Expected: invalid_reward."""
from pipeline.runtime import SkinEnv


class NanReward(SkinEnv):
    def transition(self, action):
        return self._state

    def reward(self, action):
        return float("nan"), [], {}
