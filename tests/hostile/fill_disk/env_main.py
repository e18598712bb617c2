"""Hostile env: step writes 640 MB, in 10 MB files, into its own folder and /tmp, then creates
empty files in /tmp until it cannot. Expected (namespaced rungs, where /tmp is its own): a write
past the worker's tmpfs fails inside the worker (No space left on device), the env raises, the call
fails as "disk_quota", and the next env loads on a clean disk.
"""
import os

from pipeline.runtime import SkinEnv

CHUNK = b"x" * (10 * 1024 * 1024)


class FillDisk(SkinEnv):
    def transition(self, action):
        what = self._state.get("what", "bytes")
        if what == "bytes":
            for i in range(64):
                with open(("/tmp/" if i % 2 else "") + f"fill_{i}.bin", "wb") as f:
                    f.write(CHUNK)
        else:
            for i in range(1_000_000):
                open(f"/tmp/inode_{i}", "w").close()
        return self._state

    def reward(self, action):
        return 0.0, [], {}
