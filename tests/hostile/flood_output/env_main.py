"""Hostile env: step prints 400 MB. Expected: output_limit."""
import sys

from pipeline.runtime import SkinEnv


class FloodOutput(SkinEnv):
    def transition(self, action):
        line = "x" * (1 << 20)
        for _ in range(400):
            sys.stdout.write(line)
        return self._state

    def reward(self, action):
        return 0.0, [], {}
