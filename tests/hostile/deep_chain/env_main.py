"""Hostile env: step builds a 3,000-deep chain of folders in its own folder, each with a file,
and takes every permission off them. Expected: the step succeeds; closing the worker removes
everything, and a later worker starts clean.
"""
import os

from pipeline.runtime import SkinEnv

DEPTH = 3000


class DeepChain(SkinEnv):
    def transition(self, action):
        top = os.getcwd()
        for _ in range(DEPTH):
            os.mkdir("d")
            os.chdir("d")
        with open("bottom.txt", "w") as f:
            f.write("deep")
        for _ in range(DEPTH):
            os.chdir("..")
            os.chmod("d", 0)
        os.chdir(top)
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 0.0, [], {}
