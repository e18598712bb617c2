"""Hostile env: step arms a POSIX timer whose signal handler writes a 256 KB file into the env's
folder every 20 ms, and returns: the writing goes on between calls, while the worker waits for its
next request. Expected: the host's watch ends the worker past its quota without any call running,
and the next call fails as "disk_quota".
"""
import ctypes
import os
import signal

from pipeline.runtime import SkinEnv

CHUNK = b"x" * (256 * 1024)
CLOCK_MONOTONIC, SIGEV_SIGNAL = 1, 0


class _Sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_byte * 48)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("interval_sec", ctypes.c_long), ("interval_nsec", ctypes.c_long),
                ("value_sec", ctypes.c_long), ("value_nsec", ctypes.c_long)]


def _write(*_):
    try:
        with open(f"tick_{len(os.listdir('.'))}.bin", "wb") as f:
            f.write(CHUNK)
    except OSError:  # a full disk, on a namespaced rung: keep trying, and keep the worker alive
        pass


class WriteBetweenCalls(SkinEnv):
    def transition(self, action):
        signal.signal(signal.SIGUSR1, _write)
        libc = ctypes.CDLL(None, use_errno=True)
        event = _Sigevent(None, signal.SIGUSR1, SIGEV_SIGNAL)
        timer = ctypes.c_void_p()
        assert libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) == 0
        every = _Itimerspec(0, 20_000_000, 0, 20_000_000)
        assert libc.timer_settime(timer, 0, ctypes.byref(every), None) == 0
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 0.0, [], {}
