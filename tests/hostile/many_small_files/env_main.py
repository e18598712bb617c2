"""Hostile env: step writes small files (16 KB each, or empty ones with what: inodes) into its own
folder and its tmp (TMPDIR: a private /tmp on the namespaced rungs, a folder of its own on the
landlock rung), on and on: 20,000 of them unless something stops it. Expected on every rung: the
worker is ended as "disk_quota" once past its quota, named so, and the next env loads on a clean disk.
"""
import os
import tempfile

from pipeline.runtime import SkinEnv

CHUNK = b"x" * (16 * 1024)
COUNT = 20_000


class ManySmallFiles(SkinEnv):
    def transition(self, action):
        data = CHUNK if self._state.get("what", "bytes") == "bytes" else b""
        places = [os.path.join(os.getcwd(), "written"), os.path.join(tempfile.gettempdir(), "written")]
        for place in places:
            os.makedirs(place, exist_ok=True)
        for i in range(COUNT):
            with open(os.path.join(places[i % 2], f"f{i}.bin"), "wb") as f:
                f.write(data)
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 0.0, [], {}
