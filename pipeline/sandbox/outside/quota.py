"""A worker's disk quota, watched from the host: what it wrote into the places it may write (the
changes to its folder and its tmp), in bytes and in entries, against SandboxLimits.disk_mb and
disk_inodes. Crossing it kills the worker, and its death reads as a `disk_quota` failure: counted
against the environment (or agent), like running out of memory, never an infrastructure fault.

Where a mount namespace exists (the namespaced rungs) those places are one tmpfs (confine.build_root)
sized a little above the quota (SandboxLimits.disk_bound), so the kernel bounds what a worker writes
even between two looks; the host reads its usage with one statvfs through /proc/PID/root. Elsewhere
(the landlock rung, and none) they are ordinary folders: the host sums the blocks allocated to what
is in them and counts their entries (a walk that stops once past the quota), plus files the worker
deleted but holds open, less what they held when it started.

The host looks after every call, and one thread looks at every live worker every TICK seconds (more
seldom when a walk is slow), during long calls and between calls: an environment's signal handler
may write while the worker waits for its next request.
"""
from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import Callable

from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside.failures import SandboxFailure

TICK = 0.2  # seconds between two looks at a worker, at least
WALK_SHARE = 20  # a walk that takes t seconds is made at most once every WALK_SHARE * t
MB = 1024 * 1024


@dataclass(frozen=True)
class Usage:
    bytes: int
    entries: int


class DiskQuota:
    """The quota of one worker. `measure(max_entries)` says what its writable places hold now (a walk
    may stop past `max_entries`), or None when it cannot tell (the worker is gone); `kill()` ends
    the worker without waiting; `cheap`: a look costs next to nothing (a statvfs), so every call
    ends with one."""

    def __init__(self, limits: SandboxLimits, measure: Callable[[int], Usage | None], kill: Callable[[], None],
                 cheap: bool):
        self.limits = limits
        self.cheap = cheap
        self._measure, self._kill = measure, kill
        self._lock = threading.Lock()
        self._baseline: Usage | None = None
        self._due = 0.0
        self._watching = False
        self.exceeded: SandboxFailure | None = None

    def start(self) -> None:
        """Take what the places hold now as the start (no environment code has run yet), and watch."""
        with self._lock:
            self._baseline = self._measure(1 << 62) or Usage(0, 0)
            self._watching = True
        _watch(self)

    def stop(self) -> None:
        """No more looks, and no kill: called before the worker's process is reaped."""
        with self._lock:
            self._watching = False
        _unwatch(self)

    def look(self, now: bool = False) -> SandboxFailure | None:
        """The quota failure, once crossed (the worker then killed); looks again if one is due (or
        `now`). Never raises."""
        with self._lock:
            if self.exceeded or not self._watching or (not now and time.monotonic() < self._due):
                return self.exceeded
            base, lim = self._baseline, self.limits
            started = time.monotonic()
            usage = self._measure(base.entries + lim.disk_inodes + 1)
            spent = time.monotonic() - started
            self._due = time.monotonic() + max(TICK, WALK_SHARE * spent)
            if usage is None:
                return None
            wrote, made = usage.bytes - base.bytes, usage.entries - base.entries
            if wrote > lim.disk_mb * MB or made > lim.disk_inodes:
                self.exceeded = SandboxFailure("disk_quota", (
                    f"wrote {wrote / MB:.1f} MB in {made} new files and folders into its folder and tmp, past its "
                    f"disk quota of {lim.disk_mb} MB and {lim.disk_inodes} files and folders"))
                self._kill()
            return self.exceeded


# -- measuring ------------------------------------------------------------------------------------
def tmpfs_usage(path: str) -> Usage | None:
    """What the tmpfs holding `path` holds (blocks and inodes in use), or None when it is gone."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return Usage((st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree)


def folders_usage(folders: list[str], pid: int, max_entries: int) -> Usage:
    """The blocks allocated to what is in `folders` and their number of entries (the walk stops
    after `max_entries`), plus the deleted files process `pid` holds open."""
    total = Usage(0, 0)
    for folder in folders:
        part = _walk(folder, max_entries - total.entries)
        total = Usage(total.bytes + part.bytes, total.entries + part.entries)
        if total.entries > max_entries:
            return total
    return Usage(total.bytes + _deleted_but_open(pid), total.entries)


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _walk(top: str, max_entries: int) -> Usage:
    """Depth-first, one directory open at a time (descending by name, back up by ".."), so a chain
    thousands deep neither overflows a stack nor holds a descriptor a level; follows no link; a
    directory the worker made unreadable is made readable to its owner (this uid) first."""
    blocks, entries = 0, 0
    try:
        fd = os.open(top, _DIR)
    except OSError:
        return Usage(0, 0)
    pending: list[list[str]] = []  # per level below `top`: the subdirectories not yet walked
    entering = True
    try:
        while True:
            if entering:
                names: list[str] = []
                try:
                    with os.scandir(fd) as listing:
                        for entry in listing:
                            entries += 1
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            blocks += st.st_blocks
                            if stat.S_ISDIR(st.st_mode):
                                names.append(entry.name)
                            if entries > max_entries:
                                return Usage(blocks * 512, entries)
                except OSError:
                    pass
                pending.append(names)
            while not pending[-1]:
                pending.pop()
                if not pending:
                    return Usage(blocks * 512, entries)
                parent = os.open("..", _DIR & ~os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = parent
            inner = _open_dir(pending[-1].pop(), fd)
            entering = inner is not None
            if inner is not None:
                os.close(fd)
                fd = inner
    finally:
        os.close(fd)


def _open_dir(name: str, parent: int) -> int | None:
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        pass
    except OSError:
        return None
    try:  # a folder its owner made unreadable: through a handle on that very folder, never a name
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return None
    try:
        os.chmod(f"/proc/self/fd/{handle}", 0o700)
        return os.open(f"/proc/self/fd/{handle}", _DIR & ~os.O_NOFOLLOW)
    except OSError:
        return None
    finally:
        os.close(handle)


def _deleted_but_open(pid: int) -> int:
    """Bytes of the files process `pid` deleted but holds open (a walk no longer sees them)."""
    held = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            if not os.readlink(f"/proc/{pid}/fd/{fd}").endswith(" (deleted)"):
                continue
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            held += st.st_blocks * 512
    return held


# -- the watcher: one thread for every live worker of this process --------------------------------
_watched: set[DiskQuota] = set()
_watched_lock = threading.Lock()
_thread: threading.Thread | None = None


def _watch(quota: DiskQuota) -> None:
    global _thread
    with _watched_lock:
        _watched.add(quota)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_loop, name="envforge-disk-quota", daemon=True)
            _thread.start()


def _unwatch(quota: DiskQuota) -> None:
    with _watched_lock:
        _watched.discard(quota)


def _loop() -> None:
    global _thread
    while True:
        time.sleep(TICK)
        with _watched_lock:
            quotas = list(_watched)
            if not quotas:
                _thread = None
                return
        for quota in quotas:
            quota.look()
