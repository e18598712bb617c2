"""Hostile env: step tries every escape of the confinement ladder's test (tests/test_confinement_ladder.py)
and records, per attempt, "ok ..." or the error it got; observe(want_state=True) returns them.
Expected on every rung: every attempt failed, except writing /tmp on a namespaced rung (a private
/tmp). Calls are hidden from the static scan: the sandbox itself must stop them.
"""
import builtins
import ctypes
import glob
import os
import platform

from pipeline.runtime import SkinEnv

_imp = getattr(builtins, "__imp" + "ort__")
_socket = _imp("soc" + "ket")
_threading = _imp("thread" + "ing")
_fork = getattr(os, "fo" + "rk")
_kill = getattr(os, "ki" + "ll")
ARCH = platform.machine()
IO_URING_SETUP = {"x86_64": 425, "aarch64": 425}[ARCH]
KEYCTL = {"x86_64": 250, "aarch64": 219}[ARCH]
PTRACE_ATTACH = 16
AF_PACKET, AF_VSOCK = 17, 40


def _attempt(action):
    try:
        return "ok " + str(action())[:200]
    except Exception as e:  # noqa: BLE001 - what failed is the finding
        return f"{type(e).__name__}: {e}"[:200]


def _libc_call(name, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    result = getattr(libc, name)(*args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _read(path):
    with open(path, "rb") as f:
        return len(f.read())


def _write(path):
    with open(path, "w") as f:
        f.write("escaped")
    return path


def _connect(family, kind, address, proto=0):
    s = _socket.socket(family, kind, proto)
    try:
        s.settimeout(1)
        s.connect(address)
        s.sendall(b"escaped")
    finally:
        s.close()
    return "connected"


def _fork_once():
    pid = _fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def _thread():
    t = _threading.Thread(target=lambda: None)
    t.start()
    t.join()
    return "thread ran"


def _environs():
    """Every /proc/*/environ it can read, joined: the test looks for the parent's secret in it."""
    out = []
    for path in sorted(glob.glob("/proc/[0-9]*/environ")):
        try:
            with open(path, "rb") as f:
                out.append(f.read().decode("utf-8", "replace"))
        except OSError:
            pass
    return "".join(out)[:65536]


class ConfinementProbe(SkinEnv):
    def transition(self, action):
        s = self._state
        found = {}
        for i, path in enumerate(s["secret_files"]):
            found[f"read_secret_{i}"] = _attempt(lambda: _read(path))
        found["write_outside"] = _attempt(lambda: _write(s["target"]))
        found["write_tmp"] = _attempt(lambda: _write(s["tmp_target"]))
        found["tcp_loopback"] = _attempt(lambda: _connect(_socket.AF_INET, _socket.SOCK_STREAM, ("127.0.0.1", s["port"])))
        found["udp_socket"] = _attempt(lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM).close())
        found["af_vsock"] = _attempt(lambda: _socket.socket(AF_VSOCK, _socket.SOCK_STREAM).close())
        found["af_packet"] = _attempt(lambda: _socket.socket(AF_PACKET, _socket.SOCK_RAW, 0x0300).close())
        found["unix_socket"] = _attempt(lambda: _connect(_socket.AF_UNIX, _socket.SOCK_STREAM, s["unix_socket"]))
        found["abstract_socket"] = _attempt(
            lambda: _connect(_socket.AF_UNIX, _socket.SOCK_STREAM, "\0" + s["abstract_socket"]))
        params = ctypes.create_string_buffer(120)
        found["io_uring_setup"] = _attempt(lambda: _libc_call("syscall", IO_URING_SETUP, 8, params))
        found["parent_environ"] = _attempt(lambda: _read(f"/proc/{s['host_pid']}/environ"))
        found["fork"] = _attempt(_fork_once)
        found["thread"] = _attempt(_thread)
        found["keyring"] = _attempt(lambda: _libc_call("syscall", KEYCTL, 0, -3, 0))  # GET_KEYRING_ID of @s
        found["ptrace_parent"] = _attempt(lambda: _libc_call("ptrace", PTRACE_ATTACH, s["host_pid"], None, None))
        found["signal_parent"] = _attempt(lambda: _kill(s["host_pid"], 0))
        s["found"] = found
        s["environs"] = _environs()
        s["environment"] = dict(os.environ)
        return s

    def reward(self, action):
        return 0.0, [], {}
