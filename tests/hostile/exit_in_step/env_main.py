"""Hostile env: step ends the process with os._exit(3). Expected: exit."""
import os

from pipeline.runtime import SkinEnv


class ExitInStep(SkinEnv):
    def transition(self, action):
        os._exit(3)

    def reward(self, action):
        return 0.0, [], {}
