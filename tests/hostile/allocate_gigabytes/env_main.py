"""Hostile env: step asks for 4 GB. Expected: memory."""
from pipeline.runtime import SkinEnv


class AllocateGigabytes(SkinEnv):
    def transition(self, action):
        self._hoard = bytearray(4 * 1024**3)
        return self._state

    def reward(self, action):
        return 0.0, [], {}
