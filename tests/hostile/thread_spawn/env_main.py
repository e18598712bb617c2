"""Hostile env: step starts a thread that would outlive the call. Expected: exception (thread
refused).
"""
import builtins
import time

from pipeline.runtime import SkinEnv

# Hidden from the static scan: the sandbox itself must refuse the thread.
_threading = getattr(builtins, "__imp" + "ort__")("thre" + "ading")


class ThreadSpawn(SkinEnv):
    def transition(self, action):
        _threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
        return self._state

    def reward(self, action):
        return 0.0, [], {}
