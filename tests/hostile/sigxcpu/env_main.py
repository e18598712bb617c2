"""Hostile env: step burns CPU in a tight loop; run it with a long wall limit. Expected: cpu_limit."""
from pipeline.runtime import SkinEnv


class Sigxcpu(SkinEnv):
    def transition(self, action):
        total = 0
        while True:
            total = (total * 31 + 7) % 1000003

    def reward(self, action):
        return 0.0, [], {}
