"""Hostile env: the observation is a 100 MB string. Expected: protocol (reply too large)."""
from pipeline.runtime import SkinEnv


class HugeReply(SkinEnv):
    def transition(self, action):
        return self._state

    def render_skin(self, omega):
        return "x" * (100 * 1024 * 1024) if self._t else "calm before the step"

    def reward(self, action):
        return 0.0, [], {}
