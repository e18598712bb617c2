"""Hostile env: reward is the string "1.0". Expected: invalid_reward."""
from pipeline.runtime import SkinEnv


class StringReward(SkinEnv):
    def transition(self, action):
        return self._state

    def reward(self, action):
        return "1.0", [], {}
