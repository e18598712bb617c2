"""Hostile env: the observation holds a set and an object. Expected: not_json."""
from pipeline.runtime import SkinEnv


class NotJsonObservation(SkinEnv):
    def transition(self, action):
        return self._state

    def render_skin(self, omega):
        return {"seen": {1, 2, 3}, "thing": object()} if self._t else "calm before the step"

    def reward(self, action):
        return 0.0, [], {}
