"""Hostile env: step signals its parent, pid 1, its process group and the host pid named in the
level. Expected: exception (the seccomp filter lets a worker signal itself alone), and the host untouched.
"""
import os

from pipeline.runtime import SkinEnv

# Hidden from the static scan: the sandbox itself must keep these signals in.
_kill = getattr(os, "ki" + "ll")
_killpg = getattr(os, "ki" + "llpg")
SIGKILL = 9


class KillParent(SkinEnv):
    def transition(self, action):
        attempts = []
        for name, send in (("parent", lambda: _kill(os.getppid(), SIGKILL)),
                           ("pid 1", lambda: _kill(1, SIGKILL)),
                           ("own group", lambda: _killpg(0, SIGKILL))):
            try:
                send()
                attempts.append(f"{name}: sent")
            except OSError as e:
                attempts.append(f"{name}: {type(e).__name__}")
        self._state["attempts"] = attempts
        _kill(int(self._state["host_pid"]), SIGKILL)
        return self._state

    def reward(self, action):
        return 0.0, [], {}
