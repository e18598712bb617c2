"""Hostile env: step moves the worker's working directory into a folder it makes unreadable, then
raises. Expected: a typed exception naming env_main.py and its line (the worker does not die
looking for its own folder), and the next call starts in the env's folder again.
"""
import os

from pipeline.runtime import SkinEnv


class LostCwd(SkinEnv):
    def transition(self, action):
        os.makedirs("trap", exist_ok=True)
        os.chdir("trap")
        os.chmod(".", 0)
        raise ValueError("lost")

    def reward(self, action):
        return 0.0, [], {}
