"""Parent side of a sandbox worker: start it, send requests, enforce limits, classify failures.

This is the one sandbox entry of envforge: every piece of model-written code runs
behind a `Worker`. Two layers: `WorkerProcess`, the operating-system process (started confined,
its CPU time, killed with all it started, its death classified, closed without a trace), and
`Worker`, the protocol spoken with it (the start-up handshake, loading, calls and the worker's
own requests). The pipes themselves are channel.Channel.
"""
from __future__ import annotations

import atexit
import dataclasses
import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Self

from envforge.pipeline.sandbox.limits import SandboxLimits, worker_environment
from envforge.pipeline.sandbox.outside import userns
from envforge.pipeline.sandbox.outside.capabilities import (
    LAUNCHERS,
    NONE,
    namespaced,
    own_uids,
    require,
    runs_as,
    used,
)
from envforge.pipeline.sandbox.outside.channel import Channel, Gone
from envforge.pipeline.sandbox.outside.failures import SandboxFailure, WorkerStartFailed, exit_failure, failure_of
from envforge.pipeline.sandbox.outside.folder import DIR_PREFIX, FolderCopy, private_dir, remove_tree, sweep_stale
from envforge.pipeline.sandbox.outside.quota import DiskQuota, folders_usage, tmpfs_usage
from envforge.pipeline.sandbox.protocol import ENV_MOUNT, OPENING, STARTED, WORKER_MODULE

_uid_counter = itertools.count()
# on_request(kind, args) -> answer (plain JSON): the parent's side of a worker's request.
OnRequest = Callable[[str, dict], Any]
_live: "weakref.WeakSet[WorkerProcess]" = weakref.WeakSet()
# When its child dies from SIGKILL, `unshare` (util-linux 2.38) fails to re-raise it on itself
# (SIGKILL's handler cannot be reset), prints this and exits with status 1: that status means
# the worker was killed (e.g. at the hard CPU limit when the env ignores SIGXCPU), not exit(1).
_UNSHARE_SIGKILLED = b"unshare: sigprocmask unblock failed: Invalid argument\n"


@functools.cache
def _compile_worker_code() -> None:
    """Write the bytecode of envforge's modules that only a worker imports (sandbox/inside/, the
    runtime), once a process. A worker writes none (PYTHONDONTWRITEBYTECODE, a read-only view of the
    package), and envforge's own process never imports them, so without this an install that
    compiles nothing (an editable one) has every worker start compile them again from source. Like
    Python's own caching: skipped where this process may not write bytecode, and a file it cannot
    write is left as it is."""
    if sys.dont_write_bytecode:
        return
    import compileall

    package = Path(__file__).resolve().parents[2]
    for folder in (package / "sandbox" / "inside", package / "runtime"):
        compileall.compile_dir(folder, quiet=2)


def _worker_uid() -> int:
    """A uid no one else uses, so per-uid limits (process count) bind this worker alone: one this
    user namespace maps (capabilities.own_uids; the ladder offers root no rung without one)."""
    lo, hi = own_uids()
    return lo + (os.getpid() * 4099 + next(_uid_counter)) % (hi - lo)


def _worker_ids(mode: str) -> tuple[int, int]:
    """(the uid environment code runs as, seen from here; the same uid as the worker sees it) on
    `mode`. Root's workers get a uid of their own on every rung (capabilities.runs_as says why);
    anyone else's stay that user (uid 0 of their own user namespace on the userns rung)."""
    me = os.geteuid()
    if me != 0 or mode == NONE:
        return me, 0 if mode == "userns" else me
    uid = _worker_uid()
    return uid, userns.INNER_UID if mode == "userns" else uid


_PR_SET_DUMPABLE = 4


def _undumpable() -> None:
    """Make envforge's own /proc/PID/environ (and memory) unreadable by a process of the same uid
    without CAP_SYS_PTRACE: what a worker is on every rung, and on none, its uid being envforge's."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


class WorkerProcess:
    """The operating-system side of one sandbox worker: its process, started on the confinement
    ladder's rung with a private copy of `env_dir` and its own folders; its pipes (a Channel); its CPU
    time; killing it with everything it started, and why it died; closing it without a trace.
    What is said over the pipes is Worker's."""

    def __init__(self, env_dir: str | Path, limits: SandboxLimits | None = None, host: str = "env",
                 folder: FolderCopy | None = None, unconfined: bool | None = None):
        """Start the worker process on the confinement ladder's rung (`unconfined`: may it run with
        none, see Worker), with its own private folders and a copy of `env_dir` (or `folder`, a copy
        shared with other workers on namespaced rungs, each seeing it through a private writable
        layer)."""
        self.env_dir = Path(env_dir).resolve()
        self.host = host
        self.limits = limits or SandboxLimits()
        self.mode = require(unconfined)
        self.confinement = self.mode  # the rung it runs on (the parent's word, not the worker's)
        self.uid, self._inner_uid = _worker_ids(self.mode)  # what environment code runs as (the parent's word)
        self.runs_as = runs_as(self.mode, self.uid if self.uid != os.geteuid() else None)
        used(self.mode, runs_as(self.mode))
        self._closed = False
        sweep_stale(DIR_PREFIX)
        if folder is None or not namespaced(self.mode):
            folder = FolderCopy(str(self.env_dir), self.limits.folder_mb, self.limits.folder_files)
        self.folder = folder.acquire()
        self.dropped = folder.dropped  # what the copy left out: (path, what it is)
        self.base = private_dir()
        for name in ("root", "rw", "tmp"):
            os.mkdir(os.path.join(self.base, name))
        if not namespaced(self.mode) and self.uid != os.geteuid():
            # Root's landlock worker becomes self.uid before it reads its folder copy or writes its
            # tmp: both 0700 folders of root until made its own (the copy inside is 0666/0777).
            for path in (self.folder.home, self.base, os.path.join(self.base, "tmp")):
                os.chown(path, self.uid, self.uid)
        _undumpable()
        try:
            self._start()
        except BaseException:  # no process to close later: its folders go now
            remove_tree(self.base)
            self.folder.release()
            raise
        _live.add(self)

    def _start(self) -> None:
        """The worker process; it reports `protocol.STARTED` once confined (see Worker._await_started)."""
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        output_r, output_w = os.pipe()
        _compile_worker_code()
        # Root's userns worker: a map of its own (userns.py), then the root rung's launcher inside it.
        mapped = self.mode == "userns" and self.uid != os.geteuid()
        prefix = list(LAUNCHERS["namespaces" if mapped else self.mode] if namespaced(self.mode) else ())
        # A namespaced worker's /tmp is private; elsewhere its tmp is the folder made for it.
        tmp = "/tmp" if namespaced(self.mode) else os.path.join(self.base, "tmp")
        cmd = prefix + [
            sys.executable, "-s", "-P", "-m", WORKER_MODULE,
            "--base", self.base, "--folder", self.folder.path, "--mode", self.mode, "--uid", str(self._inner_uid),
            "--fds", f"{request_r},{reply_w}", "--limits", json.dumps(self.limits.to_dict()),
        ] + (["--host", self.host] if self.host != "env" else [])
        options = dict(cwd=self.base, env=worker_environment(home=tmp), stdin=subprocess.DEVNULL,
                       stdout=output_w, stderr=output_w, pass_fds=(request_r, reply_w), start_new_session=True)
        self._unmapped = ""  # why root's userns worker got no user namespace of its own (Worker._await_started)
        try:
            if mapped:
                self.proc, self._unmapped = userns.start(cmd, self.uid, self.limits.start_seconds, **options)
            else:
                self.proc = subprocess.Popen(cmd, **options)
        finally:
            for fd in (request_r, reply_w, output_w):
                os.close(fd)
        self.channel = Channel(request_w, reply_r, output_r, self.limits)
        self.quota = self._disk_quota()

    def _disk_quota(self) -> DiskQuota:
        """The worker's disk quota (quota.py): on a namespaced rung its tmpfs, seen through its
        /proc/PID/root; elsewhere its folder copy and tmp, walked."""
        if namespaced(self.mode):
            def measure(max_entries: int):
                inner = _children(self.proc.pid)
                return tmpfs_usage(f"/proc/{inner[0]}/root/tmp") if inner else None
        else:
            places = [self.folder.path, os.path.join(self.base, "tmp")]

            def measure(max_entries: int):  # the folders stay until close(), the worker alive or not
                return folders_usage(places, self.proc.pid, max_entries)
        return DiskQuota(self.limits, measure, self._signal_kill, cheap=namespaced(self.mode))

    def _signal_kill(self) -> None:
        """SIGKILL to the process running env code, without waiting (the quota's watcher thread
        calls it; whoever waits on the worker sees it die)."""
        for pid in _children(self.proc.pid) or ([self.proc.pid] if self.proc.returncode is None else []):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # -- the process's end ------------------------------------------------------------
    def _death(self, op: str) -> SandboxFailure:
        """Why the worker is gone: past its disk quota, else its exit status, classified
        (failures.exit_failure)."""
        self.quota.stop()  # before it is reaped: its pid is not to be looked at again
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self.proc.returncode
        self.channel.drain_output()
        if code == 1 and namespaced(self.mode) and self.channel.output_tail.endswith(_UNSHARE_SIGKILLED):
            code = -signal.SIGKILL
        if self.quota.exceeded:
            return dataclasses.replace(self.quota.exceeded, op=op)
        return exit_failure(code, op, self.limits)

    @property
    def cpu_seconds_used(self) -> float:
        """CPU the worker has used over its life, read when asked (the pool asks when a lease ends),
        not after every call: the last figure read is kept once /proc cannot say."""
        self._cpu_seen = max(self._cpu_seen, self._cpu_seconds())
        return self._cpu_seen

    def _cpu_seconds(self) -> float:
        """CPU the worker has used over its life (what RLIMIT_CPU counts), read from /proc; 0.0 when
        /proc cannot say (the process is gone)."""
        pids = _children(self.proc.pid) if namespaced(self.mode) else [self.proc.pid]
        try:
            with open(f"/proc/{pids[0]}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def output_text(self) -> str:
        return self.channel.output_text()

    def _kill(self) -> None:
        # Kill the namespace's first process before `unshare`, so that `unshare` reaps it
        # and nothing is left behind, not even a zombie.
        for pid in _children(self.proc.pid) + [-self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL) if pid > 0 else os.killpg(-pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self._wait_draining_output(2):
                return

    def _wait_draining_output(self, seconds: float) -> bool:
        """Wait for the launcher to exit, reading its output meanwhile: `unshare` reports its
        child's death on stderr and would block for good on a pipe an env has filled."""
        deadline = time.monotonic() + seconds
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                return False
            self.channel.drain_output()
            time.sleep(0.005)
        return True

    @property
    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.quota.stop()
        try:
            self.channel.end_requests()  # EOF: a healthy worker exits by itself
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()
        self.channel.close()
        remove_tree(self.base)
        self.folder.release()

    def writable_folder(self) -> Path:
        """The folder as the worker sees and changes it (for tests and inspection, while it lives)."""
        if not namespaced(self.mode):
            return Path(self.folder.path)
        return Path(f"/proc/{_children(self.proc.pid)[0]}/root{ENV_MOUNT}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Worker(WorkerProcess):
    """One sandboxed process holding one environment (a private copy of `env_dir`): the protocol
    spoken with it. It reports STARTED once confined, then loads the environment (or agent); each
    call is one request line and one reply line, the worker's own requests answered meanwhile."""

    def __init__(self, env_dir: str | Path, limits: SandboxLimits | None = None, env_id: Any = None,
                 skin: str | None = None, host: str = "env", folder: FolderCopy | None = None,
                 unconfined: bool | None = None):
        """`skin`: render with the folder's skins/<skin>.py instead of the env's own render_skin.
        `host`: what the worker holds, "env" (an environment) or "agent" (a learned agent's
        agent.py, see agent_host.py). `folder`: a copy of `env_dir` shared with other workers
        (namespaced rungs only: each sees it through a private writable layer). `unconfined`: may the
        worker run with no rung of the confinement ladder (default: the --unconfined opt-in,
        ENVFORGE_UNCONFINED); without it and with no rung, `Unconfined` is raised and nothing runs."""
        self.skin = skin
        self.env_id = env_id
        self.failed = False
        self._cpu_seen = 0.0
        self._lock = threading.Lock()
        super().__init__(env_dir, limits, host, folder, unconfined)
        try:
            with self._lock:
                self._await_started()
            self.quota.start()  # what its places hold now is the start: no env code has run
            # Loading the environment (or agent) runs its code: a call like any other, timed by call_seconds.
            load = {"env_id": self.env_id, **({"skin": self.skin} if self.skin is not None else {})}
            self.info = self.call(OPENING, **load)
        except (SandboxFailure, WorkerStartFailed):
            # The caller never gets this worker, so no one else could close it: without this
            # its process (alive after a failed start or load) and temp dir would stay until exit.
            self.close()
            raise

    def _await_started(self) -> None:
        """Wait for the worker's `protocol.STARTED`, within `limits.start_seconds` (not the call limit:
        spawning, confining and importing envforge's worker code take what the machine's load makes
        them take, and no environment code runs before it). Anything else — the limit passed, the
        worker dead or saying something else first — is a `WorkerStartFailed`: an infrastructure
        fault, never a verdict on the environment."""
        seconds = self.limits.start_seconds
        try:
            if self._unmapped:
                raise SandboxFailure("timeout" if self._unmapped == userns.TIMED_OUT else "userns", self._unmapped)
            try:
                message = self.channel.receive("start", seconds, self._no_request_at_start)
            except Gone:
                raise self._death("start") from None
            if message == STARTED:
                found = self._ids_seen()
                if found in (None, (self.uid, self.uid)):  # None: gone, which the load will say
                    return
                failure = SandboxFailure("protocol", f"expected the worker to run environment code as uid and gid "
                                                     f"{self.uid}, found uid {found[0]}, gid {found[1]}")
            else:
                failure = SandboxFailure("protocol", f"expected {json.dumps(STARTED)} first, found a message with "
                                                     f"keys {sorted(map(str, message))[:6]}")
        except SandboxFailure as caught:
            failure = caught
        self.failed = True
        self._kill()
        self.channel.drain_output()
        if failure.kind == "timeout":
            what = (f"did not report ready within its start-up limit of {seconds:g}s (spawning the process, "
                    f"confining it and importing envforge's worker code: no environment code had run; "
                    f"the machine is likely too busy)")
        else:
            what = (f"failed before it reported ready, when no environment code had run "
                    f"({failure.kind}: {failure.detail})")
        output = self.output_text().strip()
        raise WorkerStartFailed(f"the sandbox worker for {self.env_dir.name} {what}"
                                + (f"; its output: {output[-300:]!r}" if output else ""))

    def _ids_seen(self) -> tuple[int, int] | None:
        """(uid, gid) of the process that will run environment code, as the kernel shows it here (the
        effective ones: what file access is checked against); None when /proc cannot say."""
        pids = _children(self.proc.pid) if namespaced(self.mode) else [self.proc.pid]
        try:
            with open(f"/proc/{pids[0]}/status") as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            return int(status["Uid"].split()[1]), int(status["Gid"].split()[1])
        except (OSError, IndexError, KeyError, ValueError):
            return None

    @staticmethod
    def _no_request_at_start(message: dict) -> None:
        raise SandboxFailure("protocol", f"the worker asked the parent for {str(message.get('request'))[:40]!r} "
                                         f"before it started")

    # -- calls -----------------------------------------------------------------------
    def call(self, op: str, timeout: float | None = None, on_request: OnRequest | None = None, **args: Any) -> Any:
        """Run one operation in the worker; raise SandboxFailure on any failure.

        While it handles the call, the worker may ask the parent for something only the parent
        may do (a learned agent's model call: the key stays here). Each such request line,
        {"request": kind, "args": {...}}, is passed to `on_request(kind, args)`, whose JSON
        answer goes back as {"answer": ...}; the worker waits for it. The call's time limit
        does not run while the parent answers. A call without `on_request` takes no requests:
        one is a protocol failure."""
        with self._lock:
            if self._closed or self.proc.poll() is not None:
                if self.quota.exceeded:  # killed between calls
                    self.failed = True
                    raise dataclasses.replace(self.quota.exceeded, op=op, output=self.output_text())
                raise SandboxFailure("usage", f"worker is closed; cannot {op}", op=op)
            seconds = timeout or self.limits.call_seconds
            return self._exchange(op, seconds, on_request, {"op": op, "args": args, "timeout": seconds})

    def _exchange(self, op: str, seconds: float, on_request: OnRequest | None, request: dict) -> Any:
        """Send `request`, then read and check the reply to `op`."""
        try:
            try:
                self.channel.send(request)
                reply = self.channel.receive(op, seconds, lambda message: self._answer(op, message, on_request))
            except Gone:
                raise self._death(op) from None
        except SandboxFailure as failure:
            failure.op = failure.op or op
            failure.output = failure.output or self.output_text()
            self.failed = True
            if failure.kind in ("timeout", "output_limit", "protocol", "cpu_limit", "crash", "exit", "disk_quota"):
                self._kill()
            raise
        # Past the quota, the call's own outcome (often "No space left on device") is its consequence.
        over = self.quota.look(now=self.quota.cheap or reply.get("ok") is not True)
        if over:
            self.failed = True
            self._kill()
            raise dataclasses.replace(over, op=op, output=self.output_text())
        if reply.get("ok") is not True:
            self.failed = True
            raise failure_of(reply, op, self.output_text())
        return reply.get("result")

    def _answer(self, op: str, message: dict, on_request: OnRequest | None) -> None:
        if on_request is None:
            raise SandboxFailure("protocol", f"the worker asked the parent for {message['request']!r} during "
                                             f"'{op}', which takes no requests")
        try:
            answer = on_request(str(message["request"]), message.get("args") or {})
        except BaseException:
            # The worker waits for an answer it will never get: it cannot serve another call.
            self.failed = True
            self._kill()
            raise
        self.channel.send({"answer": answer, "op": op})  # a Gone here ends the call in _exchange


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


@atexit.register
def _close_all() -> None:
    for worker in list(_live):
        worker.close()
