"""Hostile env: step starts a new session, then loops. Expected: timeout, and nothing left behind."""
import os

from pipeline.runtime import SkinEnv

_setsid = getattr(os, "set" + "sid")


class SetsidEscape(SkinEnv):
    def transition(self, action):
        _setsid()
        while True:
            self._state["n"] += 1

    def reward(self, action):
        return 0.0, [], {}
