"""Hostile env: step writes into /tmp, then at an absolute path outside its folder named in the
level. Expected: exception (the host path is not there to write).
"""
from pipeline.runtime import SkinEnv


class WriteOutside(SkinEnv):
    def transition(self, action):
        with open(self._state["tmp_target"], "w") as f:
            f.write("escaped")
        # The target's folder exists on the host (the test made it); a confined env sees no such folder.
        with open(self._state["target"], "w") as f:
            f.write("escaped")
        return self._state

    def reward(self, action):
        return 0.0, [], {}
