"""Hostile env: its folder holds links and special files planted by the test (symbolic and hard
links to secrets, /etc/shadow and /dev/zero, a FIFO, a device, a root-only file). Step reads every
`leak*` entry it can see in its folder and raises with what it read. Expected: the sandbox's copy
left them all out, so the loot is empty.
"""
import os

from pipeline.runtime import SkinEnv


def _read(name):
    try:
        if os.path.isdir(name):
            return sorted(os.listdir(name))
        with open(name, "rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    except OSError as e:
        return f"<{type(e).__name__}>"


class ReadLinkedFiles(SkinEnv):
    def transition(self, action):
        self._state["loot"] = {name: _read(name) for name in sorted(os.listdir(".")) if name.startswith("leak")}
        return self._state

    def reward(self, action):
        raise RuntimeError(f"loot: {self._state['loot']}")
