"""What the sandbox tests share: a Worker that can be observed from the host (its pids, its uid),
checks that nothing is left behind or leaked, and the `host` fixture (a planted secret, a folder
outside the env, a loopback listener) that hostile environments aim at."""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import select
import shutil
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from envforge.pipeline.sandbox import SandboxLimits, Worker, capabilities

HOSTILE = Path(__file__).parent / "hostile"
LEVEL = "levels/level_01.yaml"
STEP = {"action": "go", "params": {}}
CANARY = "sk-test-canary-" + uuid.uuid4().hex
NAMESPACES = capabilities()["mode"] == "namespaces"
NOT_CONFINED = f"sandbox runs in {capabilities()['mode']!r} mode ({capabilities()['reason']}): no confinement to test"

LIMITS = SandboxLimits(call_seconds=2, cpu_seconds=4)


# -- observing workers and the host ------------------------------------------------------
class RecordingWorker(Worker):
    """A Worker that remembers itself even when its constructor raises (failed load)."""

    started: list["RecordingWorker"] = []

    def _start(self) -> None:
        super()._start()
        RecordingWorker.started.append(self)

    def pids(self) -> list[int]:
        """The worker's host pids: the launcher and everything below it."""
        pids, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo += _children(pid)
        return pids

    def inner_pid(self) -> int:
        """The process running env code (below `unshare` in namespaces mode)."""
        return self.pids()[-1]


def _children(pid: int, thread: int | None = None) -> list[int]:
    """The running processes that thread `thread` (a native id; default: the main thread) of `pid` started."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{thread or pid}/children").read_text().split()]
    except OSError:
        return []


def descendants(pid: int | None = None) -> list[int]:
    """Every process below `pid` (default: this one), started by any of its threads, from /proc."""
    found, todo = [], [pid or os.getpid()]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


@contextlib.contextmanager
def slowed_machine(running: float = 0.4, period: float = 0.25):
    """A busy machine, as the commands this thread starts and their sandbox workers see it, without
    burning CPU to make it: while inside, a thread holds every process the calling thread started, and
    every process below those, stopped (SIGSTOP) for 1 - `running` of each `period` seconds and lets
    them run (SIGCONT) for the rest, so their work takes about 1/`running` times its wall-clock time,
    as it does on a loaded machine (0.4: what four busy loops on two cores leave a process), and every
    clock they read runs on meanwhile. Busy loops would have taken the cores from the rest of the
    suite; this takes nothing. Only the calling thread's processes: another thread of the test may run
    the same commands at full speed at the same time (a quiet run beside a loaded one). It gives the
    set of every process it held (filled as they start)."""
    done = threading.Event()
    held: set[int] = set()

    def signal_all(pids, sig) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def started_here() -> list[int]:
        found = _children(me, thread)
        return found + [pid for child in found for pid in descendants(child)]

    def hold() -> None:
        while not done.is_set():
            pids = started_here()
            held.update(pids)
            signal_all(pids, signal.SIGSTOP)
            done.wait(period * (1 - running))
            signal_all(pids, signal.SIGCONT)
            done.wait(period * running)

    me, thread = os.getpid(), threading.get_native_id()
    holder = threading.Thread(target=hold, name="slowed_machine", daemon=True)
    holder.start()
    try:
        yield held
    finally:
        done.set()
        holder.join()
        signal_all(held, signal.SIGCONT)


def side_by_side(quiet, loaded, running: float):
    """(quiet(), loaded()), run at the same time: `loaded` in a thread of its own under
    `slowed_machine(running)`, so only the commands it starts are held, `quiet` in this one at full
    speed. What an idle and a busy machine give, in the time of the busy run alone."""
    def slowed():
        with slowed_machine(running=running) as held:
            result = loaded()
        assert held, "slowed_machine held none of the loaded run's processes: the run was not slowed"
        return result

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="loaded") as pool:
        later = pool.submit(slowed)
        return quiet(), later.result()


def processes_of_uid(uid: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if re.search(rf"^Uid:\s+{uid}\s", status, re.M):
                found.append(f"pid {entry.name}: {(entry / 'cmdline').read_bytes()[:120]!r}")
    return found


def running(pids: list[int]) -> list[int]:
    """Those of `pids` that still exist (zombies included: nothing reaped them)."""
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def files_under(root: Path, skip: Path | None = None) -> dict[str, bytes]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and (skip is None or skip not in path.parents):
            out[str(path)] = path.read_bytes()
    return out


def assert_no_canary(where: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    assert CANARY.encode() not in data, f"the secret leaked into {where}"


def assert_nothing_left(worker: RecordingWorker, pids: list[int]) -> None:
    # Root's workers run as a uid of their own on every rung: no process of it may stay.
    own_uid = worker.uid != os.geteuid()
    deadline = time.monotonic() + 2  # let the kernel finish reaping a killed namespace
    while (running(pids) or (own_uid and processes_of_uid(worker.uid))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(pids) == [], "worker processes still running after close"
    if own_uid:
        assert processes_of_uid(worker.uid) == [], f"processes of the worker's uid {worker.uid} left"
    assert not Path(worker.base).exists(), f"temp dir {worker.base} left after close"


# -- fixtures ----------------------------------------------------------------------------
@dataclass
class Host:
    tmp: Path
    planted: Path  # where the test itself put the secret (on purpose)
    outside: Path  # a host folder the env tries to write into
    tmp_target: str  # a host /tmp path the env tries to write
    listener: socket.socket

    def connections(self) -> int:
        ready, _, _ = select.select([self.listener], [], [], 0.2)
        return len(ready)

    def env(self, case: str, **extra) -> Path:
        """A copy of tests/hostile/<case> whose level names this host's port, paths and pid."""
        env_dir = self.tmp / "envs" / case
        shutil.copytree(HOSTILE / case, env_dir)
        level_path = env_dir / LEVEL
        level = yaml.safe_load(level_path.read_text())
        fields = {"port": self.listener.getsockname()[1], "host_pid": os.getpid(),
                  "target": str(self.outside / "escaped.txt"), "tmp_target": self.tmp_target,
                  "secret_files": [str(self.planted / ".env"), str(self.planted / "credentials")]}
        level.update({k: v for k, v in fields.items() if k in level}, **extra)
        level_path.write_text(yaml.safe_dump(level))
        return env_dir


@pytest.fixture
def host(tmp_path, monkeypatch):
    planted = tmp_path / "planted"
    planted.mkdir()
    for name in (".env", "credentials"):
        (planted / name).write_text(f"OPENAI_API_KEY={CANARY}\n")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("ENVFORGE_TEST_PASSWORD", CANARY)
    monkeypatch.setenv("HOME", str(planted))
    outside = tmp_path / "outside"
    outside.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    RecordingWorker.started.clear()
    tmp_target = f"/tmp/envforge-hostile-{uuid.uuid4().hex}.txt"
    yield Host(tmp_path, planted, outside, tmp_target, listener)
    listener.close()
    for worker in RecordingWorker.started:
        worker.close()
