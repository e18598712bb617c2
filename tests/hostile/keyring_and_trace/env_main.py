"""Hostile env: step lists and reads the keys of the session keyring it inherited (envforge's, under
a login session), then tries to trace itself, to make a user namespace and to mount, and raises
with what it got. Expected: the seccomp filter refused every one of those calls (EPERM), and no key.
"""
import ctypes
import errno
import platform

from pipeline.runtime import SkinEnv

KEYCTL = {"x86_64": 250, "aarch64": 219}[platform.machine()]
KEYCTL_GET_KEYRING_ID, KEYCTL_READ, KEY_SPEC_SESSION_KEYRING = 0, 11, -3
PTRACE_TRACEME, CLONE_NEWUSER = 0, 0x10000000


class KeyringAndTrace(SkinEnv):
    def transition(self, action):
        libc = ctypes.CDLL(None, use_errno=True)
        found = {}

        def attempt(name, result):
            found[name] = "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
            return result

        attempt("keyctl", libc.syscall(KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0))
        buf = ctypes.create_string_buffer(4096)
        size = libc.syscall(KEYCTL, KEYCTL_READ, KEY_SPEC_SESSION_KEYRING, buf, 4096)
        keys = []
        for i in range(0, max(size, 0), 4):
            key = int.from_bytes(buf.raw[i:i + 4], "little")
            payload = ctypes.create_string_buffer(4096)
            n = libc.syscall(KEYCTL, KEYCTL_READ, key, payload, 4096)
            keys.append(payload.raw[:max(n, 0)].decode("utf-8", "replace"))
        attempt("ptrace", libc.ptrace(PTRACE_TRACEME, 0, None, None))
        attempt("unshare", libc.unshare(CLONE_NEWUSER))
        attempt("mount", libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
        self._state["found"] = " ".join(f"{k}={v}" for k, v in found.items()) + f"; keys: {keys}"
        return self._state

    def reward(self, action):
        raise RuntimeError(self._state["found"])
