"""A pool of sandbox workers, reused for the same environment where that is safe.

A worker is handed back to the pool only if it is alive, never failed, and has CPU
budget left; a worker that failed once is closed, since its environment may be in any
state. Workers are keyed by the environment folder's path and content signature, so an
edited folder never reuses a worker holding the old code. The workers of one key share one
copy of the folder (each writes to a private layer over it), made once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import defaultdict
from pathlib import Path
from typing import Iterator

from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside.capabilities import capabilities, namespaced
from envforge.pipeline.sandbox.outside.executor import current, open_worker
from envforge.pipeline.sandbox.outside.folder import FolderCopy, signature
from envforge.pipeline.sandbox.outside.process import Worker

CPU_REUSE_SHARE = 0.8  # a worker that used more of its CPU seconds is not reused


class WorkerPool:
    def __init__(self, size: int = 2, limits: SandboxLimits | None = None, host: str = "env", skin: str | None = None):
        """`host`: what the workers hold (see Worker): environments, or learned agents.
        `skin`: every environment renders through its skins/<skin>.py. Its workers run where the
        call that made it runs them (executor.running_on), whichever thread leases one."""
        self.executor = current()
        self.size = max(1, int(size))
        self.limits = limits or SandboxLimits()
        self.host = host
        self.skin = skin
        self._slots = threading.BoundedSemaphore(self.size)
        self._lock = threading.Lock()
        self._idle: dict[tuple, list[Worker]] = defaultdict(list)
        self._copies: dict[tuple, FolderCopy] = {}
        self._copying = threading.Lock()
        self._leased = 0
        self.started = 0
        self.reused = 0

    @contextlib.contextmanager
    def lease(self, env_dir: str | Path) -> Iterator[Worker]:
        """A worker holding `env_dir`, loaded and ready; returned to the pool afterwards."""
        env_dir = Path(env_dir).resolve()
        key = signature(str(env_dir))
        with self._slots:
            with self._lock:
                self._leased += 1
            try:
                worker = self._take(key)
                if worker is None:
                    self._evict_one()  # an idle worker of another folder holds memory (or a node's CPU)
                    worker = open_worker(env_dir, self.limits, skin=self.skin, host=self.host,
                                         folder=self._copy(key, env_dir), executor=self.executor)
                    self.started += 1
                try:
                    yield worker
                finally:
                    self._give_back(key, worker)
            finally:
                with self._lock:
                    self._leased -= 1

    def _copy(self, key: tuple, env_dir: Path) -> FolderCopy | None:
        if not namespaced(capabilities()["mode"]):
            return None  # each worker writes to its own copy
        with self._copying:
            if key not in self._copies:
                self._copies[key] = FolderCopy(str(env_dir), self.limits.folder_mb, self.limits.folder_files).acquire()
            return self._copies[key]

    def _take(self, key: tuple) -> Worker | None:
        with self._lock:
            while self._idle[key]:
                worker = self._idle[key].pop()
                if worker.alive:
                    self.reused += 1
                    return worker
                # Killed while idle: past its disk quota (the environment wrote between calls), a
                # failure of the environment that the next lease reports, not a fresh start.
                over = getattr(getattr(worker, "quota", None), "exceeded", None)
                worker.close()
                if over is not None:
                    raise dataclasses.replace(over, op="lease")
        return None

    def _evict_one(self) -> None:
        """Close an idle worker when live workers would otherwise outnumber the pool's size."""
        with self._lock:
            idle = sum(len(v) for v in self._idle.values())
            crowded = idle + self._leased > self.size  # this lease included
            victim = next((ws.pop() for ws in self._idle.values() if ws), None) if crowded else None
        if victim is not None:
            victim.close()

    def _give_back(self, key: tuple, worker: Worker) -> None:
        # CPU is counted over the worker's life, across leases: one near its limit would fail the
        # next lease's work for a reason that is not that work's.
        budget_left = worker.cpu_seconds_used < CPU_REUSE_SHARE * worker.limits.cpu_seconds
        healthy = worker.alive and not worker.failed and budget_left
        if healthy:
            with self._lock:
                # Idle workers hold memory; keep no more than the pool size in all.
                if sum(len(v) for v in self._idle.values()) < self.size:
                    self._idle[key].append(worker)
                    return
        worker.close()

    def close(self) -> None:
        with self._lock:
            workers = [w for ws in self._idle.values() for w in ws]
            self._idle.clear()
        for worker in workers:
            worker.close()
        with self._copying:
            copies = list(self._copies.values())
            self._copies.clear()
        for copy in copies:
            copy.release()  # removed once its last worker closes

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
