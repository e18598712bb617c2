"""Hostile env: step reads every file the level names (a root-owned 0600 file outside its folder,
/etc/shadow) and keeps what it read, or the error, in the state; it also notes the ids it runs as
and its capabilities. Expected on every rung: every read failed, a uid that is not 0, no
supplementary groups, no capabilities. Calls are hidden from the static scan: the sandbox must stop them.
"""
import builtins
import ctypes
import os

from pipeline.runtime import SkinEnv

_open = getattr(builtins, "op" + "en")


def _read(path):
    try:
        with _open(path, "rb") as f:
            return "ok " + f.read(4096).decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - what failed is the finding
        return f"{type(e).__name__}: {e}"[:200]


def _capabilities():
    """(effective, permitted, inheritable) of this process, from capget (no /proc needed)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if ctypes.CDLL(None, use_errno=True).capget(header, data) != 0:
        return "capget failed"
    return [data[0] | data[3] << 32, data[1] | data[4] << 32, data[2] | data[5] << 32]


class ReadRootFiles(SkinEnv):
    def transition(self, action):
        s = self._state
        s["read"] = {path: _read(path) for path in s["files"]}
        s["ids"] = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
                    "groups": os.getgroups(), "capabilities": _capabilities()}
        return s

    def reward(self, action):
        return 0.0, [], {}
