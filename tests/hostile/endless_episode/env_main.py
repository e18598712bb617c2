"""Hostile env: tries to make its episodes endless. Every step it winds its own step counter
back, raises its own max_steps, and its done() is never true; the worker's step cap would
follow it if it trusted the env. Expected: the runtime truncates every episode at config.yaml's
termination.max_steps, whatever the env says.
"""
from pipeline.runtime import SkinEnv


class EndlessEpisode(SkinEnv):
    max_steps = 10 ** 9  # over the runtime's property

    def transition(self, action):
        self._state["n"] += 1
        self._t = -1  # the runtime adds one: the env claims it never took a step
        self.configs.setdefault("termination", {})["max_steps"] = 10 ** 9
        return self._state

    def reward(self, action):
        return 1.0, [], {}

    def done(self, state=None):
        return False
