"""Hostile env: patches the worker's own checks (finite reward, plain-JSON encoder) so its NaN
reward reaches the parent. Expected: the host's reply check refuses it (invalid_reward)."""
import json
import sys

from pipeline.runtime import SkinEnv

_host = sys.modules["envforge.pipeline.sandbox.inside.host"]
_host._check_reward = lambda value, env, what="reward": value
sys.modules["envforge.pipeline.sandbox.protocol"].encode = lambda reply: (json.dumps(reply) + "\n").encode()


class ForgedNan(SkinEnv):
    def transition(self, action):
        return self._state

    def reward(self, action):
        return float("nan"), [], {}
