"""Hostile env: importing env_main never finishes. Expected: timeout during load."""
from pipeline.runtime import SkinEnv

spins = 0
while True:
    spins += 1


class ImportTimeLoop(SkinEnv):
    def transition(self, action):
        return self._state

    def reward(self, action):
        return 0.0, [], {}
