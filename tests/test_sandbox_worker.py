"""The sandbox worker with a sound environment: plain JSON replies, snapshots, the worker pool,
writes kept in a private copy of the folder, and nothing left behind after close or a failed load."""
from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_kit import LEVEL, LIMITS, STEP, RecordingWorker, assert_nothing_left, files_under, running

from envforge.pipeline.sandbox import SandboxFailure, Worker, WorkerPool, WorkerStartFailed
from envforge.pipeline.sandbox.outside.client import EnvClient

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
        # The load reply no longer carries the episode length: that is config.yaml's, read on the host.
        assert worker.info == {"class": "Counter"}
        env = EnvClient(worker, max_steps=5)
        assert env.class_name == "Counter"
        assert env.reset(LEVEL).observation == "{n: 0, t: 0}"
        reply = env.step({"action": "add", "params": {"by": 2}})
        assert {k: getattr(reply, k) for k in ("reward", "done", "observation", "events", "t")} == {
            "reward": 2.0, "done": False, "observation": "{n: 2, t: 1}", "events": ["counted"], "t": 1}
        for _ in range(4):
            reply = env.step(STEP)
        assert (reply.done, reply.t) == (True, 5)
        # Its done() is only the step count: the runtime's cap, so the episode was truncated, not ended.
        assert (reply.terminated, reply.truncated) == (False, True)


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


def test_an_env_class_is_made_with_its_id_only_when_its_constructor_takes_one(counter):
    """A constructor taking no argument is called with none; a TypeError the constructor itself raises
    is its load failure as it said it, never a retry without the id (chosen by its signature, not
    by the words of the error)."""
    main = counter / "env_main.py"
    main.write_text(COUNTER.lstrip() + "\n    def __init__(self):\n        super().__init__('own id')\n")
    with Worker(counter, LIMITS) as worker:
        assert EnvClient(worker, max_steps=5).reset(LEVEL).observation == "{n: 0, t: 0}"
    said = "helper() takes 1 positional argument but 2 were given"
    main.write_text(COUNTER.lstrip() + f"\n    def __init__(self, env_id):\n        raise TypeError({said!r})\n")
    with pytest.raises(SandboxFailure) as caught:
        Worker(counter, LIMITS)
    assert caught.value.kind == "load"
    assert f"TypeError: {said}" in caught.value.detail
    assert "missing 1 required positional argument" not in caught.value.detail


def test_a_worker_that_does_not_start_in_time_is_an_infrastructure_fault_and_leaves_nothing(counter):
    """A worker's start (spawn, confinement, envforge's own imports: no env code) has its own limit,
    apart from the env's calls; past it the worker is an infrastructure fault, never a SandboxFailure
    (a finding about the env), and nothing is left behind. A limit no start can meet stands in for a
    machine too busy to start one in time."""
    import dataclasses

    from envforge.pipeline.errors import InfrastructureError

    with pytest.raises(WorkerStartFailed) as caught:
        RecordingWorker(counter, dataclasses.replace(LIMITS, start_seconds=0.001))
    assert isinstance(caught.value, InfrastructureError) and not isinstance(caught.value, SandboxFailure)
    assert str(caught.value).startswith("the sandbox worker for counter did not report ready within its start-up "
                                        "limit of 0.001s"), caught.value
    assert "no environment code had run" in str(caught.value)
    worker = RecordingWorker.started[-1]
    assert_nothing_left(worker, [worker.proc.pid])


def test_a_worker_not_running_as_the_uid_the_parent_chose_loads_nothing(counter):
    """The parent reads the uid and gid the worker's process has once it says it is confined (from
    /proc, not the worker's word): one other than it chose is a failed start, before the env's code
    is loaded. Here the parent's record of the uid is off by one, as a worker that skipped its change
    of uid would be."""
    class Misnamed(RecordingWorker):
        def _start(self) -> None:
            super()._start()
            self.expected, self.uid = self.uid, self.uid + 1

    with pytest.raises(WorkerStartFailed) as caught:
        Misnamed(counter, LIMITS)
    worker = RecordingWorker.started[-1]
    assert f"expected the worker to run environment code as uid and gid {worker.uid}, found uid " \
           f"{worker.expected}, gid {worker.expected}" in str(caught.value), caught.value
    assert "no environment code had run" in str(caught.value)
    assert_nothing_left(worker, [worker.proc.pid])


def test_the_call_limit_bounds_the_envs_load_not_the_workers_start(counter):
    """A call limit no start could meet (1 ms): the worker still starts (its start has its own limit),
    and the limit fires on the first call of the env's code, its load (an import of 0.2 s): a finding
    about the env."""
    import dataclasses

    main = counter / "env_main.py"
    main.write_text("import time\ntime.sleep(0.2)\n" + main.read_text())

    class Reporting(RecordingWorker):
        def _await_started(self) -> None:
            super()._await_started()
            self.reported_started = True  # the worker said {"started": true} within its start-up limit

    with pytest.raises(SandboxFailure) as caught:
        Reporting(counter, dataclasses.replace(LIMITS, call_seconds=0.001))
    assert (caught.value.kind, caught.value.op, caught.value.detail) == ("timeout", "load",
                                                                         "'load' took longer than 0.001s")
    worker = RecordingWorker.started[-1]
    assert getattr(worker, "reported_started", False)
    assert_nothing_left(worker, [worker.proc.pid])


def test_a_worker_started_with_flags_it_does_not_know_stops_with_one_line():
    """The worker's entry point parses the one shape process.Worker writes (no command-line parser
    library outside the command layer); anything else stops it before it confines or loads."""
    import subprocess
    import sys

    for argv in (["--base", "/x"], ["--base", "/x", "--folder", "/y", "--mode", "none", "--uid", "0", "--fds", "3,4",
                                    "--limits", "{}", "--shell", "sh"]):
        done = subprocess.run([sys.executable, "-m", "envforge.pipeline.sandbox.inside.worker", *argv],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("envforge sandbox worker: expected the flags --base --folder --mode --uid "
                                      "--fds --limits"), done.stderr
        assert "Traceback" not in done.stderr
