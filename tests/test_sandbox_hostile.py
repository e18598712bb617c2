"""Hostile environments end as typed failures and leave the host untouched (issue 2, item 8).

Each folder under tests/hostile/ is a complete environment that misbehaves in one way. Run in a
`Worker`, it must end as a `SandboxFailure` of the expected kind, and afterwards: the loopback
listener got no connection, no file appeared outside the env's private folder and /tmp, the
canary secret set in the parent's environment is in no reply, no worker output and no file, and
no process of the worker is left.
"""
from __future__ import annotations

import os
import re
import select
import shutil
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pipeline.sandbox import Limits, SandboxFailure, Worker, WorkerPool, capabilities
from pipeline.sandbox.static import scan_env

HOSTILE = Path(__file__).parent / "hostile"
LEVEL = "levels/level_01.yaml"
STEP = {"action": "go", "params": {}}
CANARY = "sk-test-canary-" + uuid.uuid4().hex
NAMESPACES = capabilities()["mode"] == "namespaces"
NOT_CONFINED = f"sandbox runs in {capabilities()['mode']!r} mode ({capabilities()['reason']}): no confinement to test"

LIMITS = Limits(call_seconds=2, cpu_seconds=4)
# A long wall-clock limit, so that the CPU limit is what ends the call.
CPU_LIMITS = Limits(call_seconds=30, cpu_seconds=1)


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # the operation that fails: load, reset or step
    kind: str
    detail: str  # regex the failure's detail must match
    limits: Limits = LIMITS
    # Only meaningful (or only safe) when the worker is confined: in plain mode `kill_parent`
    # would kill the test runner and `fork_bomb` would really fork.
    confined: bool = False


CASES = [
    Case("infinite_loop", "step", "timeout", r"'step' took longer than 2s"),
    Case("allocate_gigabytes", "step", "memory", r"MemoryError"),
    Case("fork_bomb", "step", "exception", r"BlockingIOError", confined=True),
    Case("thread_spawn", "step", "exception", r"can't start new thread", confined=True),
    Case("steal_credentials", "step", "exception", r"RuntimeError: loot: .*PATH", confined=True),
    Case("connect_loopback", "step", "exception", r"Network is unreachable", confined=True),
    Case("write_outside", "step", "exception", r"(FileNotFoundError|PermissionError)", confined=True),
    Case("exit_in_step", "step", "exit", r"exited with status 3 during 'step'"),
    Case("flood_output", "step", "output_limit", r"printed more than 1024 KB"),
    Case("nan_reward", "step", "invalid_reward", r"expected a finite number, found nan"),
    Case("string_reward", "step", "invalid_reward", r"expected a finite number, found '1\.0'"),
    Case("not_json_observation", "step", "not_json", r"set is not JSON serializable"),
    Case("import_time_loop", "load", "timeout", r"'load' took longer than 2s"),
    Case("huge_reply", "step", "protocol", r"reply to 'step' is larger than 32 MB"),
    Case("sigxcpu", "step", "cpu_limit", r"used more than 1s of CPU during 'step'", CPU_LIMITS),
    Case("sigxcpu_ignored", "step", "crash", r"killed by SIGKILL during 'step'", CPU_LIMITS),
    Case("kill_parent", "step", "exception", r"ProcessLookupError", confined=True),
    Case("setsid_escape", "step", "timeout", r"'step' took longer than 2s", confined=True),
]
# Failures after which the worker process is still alive (the env raised; nothing was killed).
ALIVE_AFTER = {"exception", "memory", "invalid_reward", "not_json"}


# -- observing workers and the host ------------------------------------------------------
class RecordingWorker(Worker):
    """A Worker that remembers itself even when its constructor raises (failed load)."""

    started: list["RecordingWorker"] = []

    def _start(self) -> None:
        super()._start()
        RecordingWorker.started.append(self)

    @property
    def uid(self) -> int:
        return int(self.proc.args[self.proc.args.index("--uid") + 1])

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


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


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
    deadline = time.monotonic() + 2  # let the kernel finish reaping a killed namespace
    while (running(pids) or (NAMESPACES and processes_of_uid(worker.uid))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(pids) == [], "worker processes still running after close"
    if NAMESPACES:
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


# -- hostile cases -----------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_env_ends_as_typed_failure_and_host_is_untouched(case: Case, host: Host):
    if case.confined and not NAMESPACES:
        pytest.skip(NOT_CONFINED)
    env_dir = host.env(case.name)
    original = files_under(env_dir)
    replies = []
    with pytest.raises(SandboxFailure) as caught:
        worker = RecordingWorker(env_dir, case.limits)
        replies.append(worker.call("reset", level=LEVEL))
        replies.append(worker.call("step", action=STEP))
    failure = caught.value
    worker = RecordingWorker.started[-1]

    assert (failure.kind, failure.op) == (case.kind, case.op), str(failure)
    assert re.search(case.detail, failure.detail), failure.detail
    if case.kind in ("exception", "memory", "invalid_reward"):
        assert failure.where.startswith("env_main.py:"), failure.where

    # While the worker still lives: what it wrote stays in its own folder copy and private /tmp.
    written = {}
    if case.kind in ALIVE_AFTER:
        assert worker.alive, "the env raised, yet the worker process is gone"
        if NAMESPACES:
            written.update(files_under(Path(f"/proc/{worker.inner_pid()}/root/tmp")))
        written.update(files_under(worker.writable_folder()))
    if case.kind == "exception":
        replies.append(worker.call("observe", want_state=True))
    pids = worker.pids()
    output = worker.output_text()
    worker.close()

    assert host.connections() == 0, "the env reached the loopback listener"
    assert list(host.outside.iterdir()) == [], "the env wrote into a host folder outside its own"
    assert not Path(host.tmp_target).exists(), "the env wrote into the host's /tmp"
    assert files_under(env_dir) == original, "the env changed the original folder"
    for where, text in [("the failure", str(failure)), ("the failure's output", failure.output),
                        ("the worker's output", output), ("the replies", repr(replies))]:
        assert_no_canary(where, text)
    for path, data in {**written, **files_under(host.tmp, skip=host.planted)}.items():
        assert_no_canary(path, data)
    assert_nothing_left(worker, pids)
    if case.name == "steal_credentials":
        loot = [p for p in written if p.endswith("/loot.txt")]
        assert len(loot) == (2 if NAMESPACES else 1), sorted(written)  # its /tmp and its own folder
        assert all(b"PATH" in written[p] for p in loot), "the env read no environment at all"
        assert "PATH" in replies[-1]["state"]["loot"]
    if case.name == "write_outside":
        private = Path(host.tmp_target).name
        assert any(Path(p).name == private for p in written), "the /tmp write should land in the private /tmp"


@pytest.mark.skipif(not NAMESPACES, reason=NOT_CONFINED)
def test_fork_bomb_leaves_only_the_worker_itself(host: Host):
    worker = RecordingWorker(host.env("fork_bomb"), LIMITS)
    worker.call("reset", level=LEVEL)
    with pytest.raises(SandboxFailure, match="BlockingIOError"):
        worker.call("step", action=STEP)
    assert [p.split(":")[0] for p in processes_of_uid(worker.uid)] == [f"pid {worker.inner_pid()}"]
    assert worker.call("ping") == {"pong": True}


@pytest.mark.skipif(not NAMESPACES, reason=NOT_CONFINED)
def test_kill_parent_reaches_neither_launcher_nor_host(host: Host):
    worker = RecordingWorker(host.env("kill_parent"), LIMITS)
    worker.call("reset", level=LEVEL)
    with pytest.raises(SandboxFailure, match="ProcessLookupError"):
        worker.call("step", action=STEP)
    state = worker.call("observe", want_state=True)["state"]
    assert len(state["attempts"]) == 3, state
    assert worker.proc.poll() is None, "the launcher (unshare) was killed"
    assert worker.call("ping") == {"pong": True}


# -- static scan ---------------------------------------------------------------------------
def test_static_scan_names_visible_forbidden_calls_with_file_and_line():
    found = {case: [str(p) for p in scan_env(HOSTILE / case) if p.severity == "error"]
             for case in ("exit_in_step", "steal_credentials")}
    assert found == {
        "exit_in_step": [f"env_main.py:{_line_of('exit_in_step', 'os._exit(3)')}: expected no process, "
                         "network, exit, environment or foreign calls, found os._exit"],
        "steal_credentials": [f"env_main.py:{_line_of('steal_credentials', 'loot = ')}: expected "
                              "no process, network, exit, environment or foreign calls, found os.environ"],
    }


@pytest.mark.parametrize("case", ["fork_bomb", "thread_spawn", "connect_loopback", "kill_parent", "setsid_escape"])
def test_hidden_calls_pass_the_static_scan_so_only_the_sandbox_stops_them(case):
    # Guards the premise of the runtime tests: these envs must reach the sandbox.
    assert [str(p) for p in scan_env(HOSTILE / case) if p.severity == "error"] == []


def _line_of(case: str, text: str) -> int:
    lines = (HOSTILE / case / "env_main.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(text))


# -- a sound env: happy path and protocol --------------------------------------------------
COUNTER = '''
import os

from pipeline.runtime import SkinEnv


class Counter(SkinEnv):
    def transition(self, action):
        name = action["action"]
        if name == "explode":
            raise ValueError("boom")
        if name == "hang":
            while True:
                pass
        if name == "scribble":
            with open("notes.txt", "w") as f:
                f.write("mine")
            with open("levels/level_01.yaml", "w") as f:
                f.write("n: 1000\\n")
            os.makedirs("levels/extra", exist_ok=True)
        self._state["n"] += int(action.get("params", {}).get("by", 1))
        return self._state

    def reward(self, action):
        return float(self._state["n"]), ["counted"], {}
'''


@pytest.fixture
def counter(tmp_path) -> Path:
    env_dir = tmp_path / "counter"
    (env_dir / "levels").mkdir(parents=True)
    (env_dir / "env_main.py").write_text(COUNTER.lstrip())
    (env_dir / "config.yaml").write_text("termination:\n  max_steps: 5\n")
    (env_dir / LEVEL).write_text("n: 0\n")
    return env_dir


def test_sound_env_steps_with_plain_json_replies(counter):
    with Worker(counter, LIMITS) as worker:
        assert worker.info == {"class": "Counter", "max_steps": 5}
        assert worker.call("reset", level=LEVEL)["observation"] == "{n: 0, t: 0}"
        reply = worker.call("step", action={"action": "add", "params": {"by": 2}})
        assert {k: reply[k] for k in ("reward", "done", "observation", "events", "t")} == {
            "reward": 2.0, "done": False, "observation": "{n: 2, t: 1}", "events": ["counted"], "t": 1}
        for _ in range(4):
            reply = worker.call("step", action=STEP)
        assert (reply["done"], reply["t"]) == (True, 5)


def test_snapshot_restore_round_trip_gives_identical_observations(counter):
    with Worker(counter, LIMITS) as worker:
        worker.call("reset", level=LEVEL)
        worker.call("step", action=STEP)
        handle = worker.call("snapshot")["handle"]
        before = worker.call("observe", want_state=True)
        first_path = [worker.call("step", action={"action": "add", "params": {"by": k}}) for k in (1, 2, 3)]
        assert worker.call("observe")["observation"] != before["observation"]
        worker.call("restore", handle=handle)
        assert worker.call("observe", want_state=True) == before
        second_path = [worker.call("step", action={"action": "add", "params": {"by": k}}) for k in (1, 2, 3)]
        assert second_path == first_path
        assert worker.call("drop") == {"held": 0}
        with pytest.raises(SandboxFailure) as caught:
            worker.call("restore", handle=handle)
        assert caught.value.kind == "usage"


def test_pool_reuses_a_healthy_worker(counter):
    with WorkerPool(1, LIMITS) as pool:
        with pool.lease(counter) as first:
            first.call("reset", level=LEVEL)
            pid = first.proc.pid
        with pool.lease(counter) as second:
            assert second is first and second.proc.pid == pid
            assert second.call("ping") == {"pong": True}
        assert (pool.started, pool.reused) == (1, 1)


@pytest.mark.parametrize("action, kind, process_survives", [
    ({"action": "explode"}, "exception", True),  # the env failed; its process lives on
    ({"action": "hang"}, "timeout", False),  # the worker was killed
])
def test_pool_replaces_a_worker_that_failed(counter, action, kind, process_survives):
    with WorkerPool(1, LIMITS) as pool:
        with pool.lease(counter) as first:
            first.call("reset", level=LEVEL)
            with pytest.raises(SandboxFailure) as caught:
                first.call("step", action=action)
            assert caught.value.kind == kind
            assert first.alive is process_survives
        assert not first.alive and not Path(first.base).exists(), "a failed worker must be closed"
        with pool.lease(counter) as second:
            assert second is not first
            assert second.call("reset", level=LEVEL)["observation"] == "{n: 0, t: 0}"
        assert (pool.started, pool.reused) == (2, 0)


def test_env_writes_go_to_a_private_copy_of_its_folder(counter):
    original = files_under(counter)
    with Worker(counter, LIMITS) as worker:
        worker.call("reset", level=LEVEL)
        worker.call("step", action={"action": "scribble"})
        copy = worker.writable_folder()
        assert (copy / "notes.txt").read_text() == "mine"
        assert (copy / LEVEL).read_text() == "n: 1000\n"
    assert files_under(counter) == original
    assert sorted(p.name for p in (counter / "levels").iterdir()) == ["level_01.yaml"]


def test_closed_worker_leaves_no_process_or_temp_dir(counter, host):
    worker = RecordingWorker(counter, LIMITS)
    worker.call("reset", level=LEVEL)
    base, pids = Path(worker.base), worker.pids()
    assert base.is_dir() and running(pids) == pids
    worker.close()
    assert not worker.alive
    assert_nothing_left(worker, pids)
    with pytest.raises(SandboxFailure) as caught:
        worker.call("ping")
    assert caught.value.kind == "usage"


def test_failed_load_leaves_no_process_or_temp_dir(tmp_path, host):
    env_dir = tmp_path / "broken"
    (env_dir / "levels").mkdir(parents=True)
    (env_dir / "env_main.py").write_text("raise ValueError('not an environment')\n")
    (env_dir / "config.yaml").write_text("termination:\n  max_steps: 5\n")
    with pytest.raises(SandboxFailure) as caught:
        RecordingWorker(env_dir, LIMITS)
    assert (caught.value.kind, caught.value.where) == ("load", "env_main.py:1")
    assert "ValueError: not an environment" in caught.value.detail
    worker = RecordingWorker.started[-1]
    assert_nothing_left(worker, [worker.proc.pid])
