"""Hostile environments end as typed failures and leave the host untouched (issue 2, item 8).

Each folder under tests/hostile/ is a complete environment that misbehaves in one way. Run in a
`Worker`, it must end as a `SandboxFailure` of the expected kind, and afterwards: the loopback
listener got no connection, no file appeared outside the env's private folder and /tmp, the
canary secret set in the parent's environment is in no reply, no worker output and no file, and
no process of the worker is left.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from sandbox_kit import (
    HOSTILE,
    LEVEL,
    LIMITS,
    NAMESPACES,
    NOT_CONFINED,
    STEP,
    Host,
    RecordingWorker,
    assert_no_canary,
    assert_nothing_left,
    files_under,
    processes_of_uid,
)

from envforge.pipeline.check.static import scan_env
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits

# A long wall-clock limit, so that the CPU limit is what ends the call.
CPU_LIMITS = SandboxLimits(call_seconds=30, cpu_seconds=1)


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # the operation that fails: load, reset or step
    kind: str
    detail: str  # regex the failure's detail must match
    limits: SandboxLimits = LIMITS
    # Only meaningful (or only safe) when the worker is confined: in plain mode `kill_parent`
    # would kill the test runner and `fork_bomb` would really fork.
    confined: bool = False


CASES = [
    Case("infinite_loop", "step", "timeout", r"'step' took longer than 2s"),
    Case("allocate_gigabytes", "step", "memory", r"MemoryError"),
    Case("fork_bomb", "step", "exception", r"BlockingIOError", confined=True),
    Case("thread_spawn", "step", "exception", r"can't start new thread", confined=True),
    Case("steal_credentials", "step", "exception", r"RuntimeError in \w+\(\): loot: .*PATH", confined=True),
    Case("connect_loopback", "step", "exception", r"Operation not permitted", confined=True),  # socket() refused
    Case("write_outside", "step", "exception", r"(FileNotFoundError|PermissionError)", confined=True),
    Case("exit_in_step", "step", "exit", r"exited with status 3 during 'step'"),
    Case("flood_output", "step", "output_limit", r"printed more than 1024 KB"),
    Case("nan_reward", "step", "invalid_reward", r"expected a finite number, found nan"),
    Case("string_reward", "step", "invalid_reward", r"expected a finite number, found '1\.0'"),
    Case("not_json_observation", "step", "not_json", r"object is not plain data"),  # sets convert (issue 14)
    Case("import_time_loop", "load", "timeout", r"'load' took longer than 2s"),
    # A long deadline, so that on a busy machine the reply-size limit, not the clock, ends the call.
    Case(
        "huge_reply",
        "step",
        "protocol",
        r"reply to 'step' is larger than 32 MB",
        SandboxLimits(call_seconds=120, cpu_seconds=60),
    ),
    Case("sigxcpu", "step", "cpu_limit", r"used more than 1s of CPU during 'step'", CPU_LIMITS),
    Case("sigxcpu_ignored", "step", "crash", r"killed by SIGKILL during 'step'", CPU_LIMITS),
    Case("kill_parent", "step", "exception", r"PermissionError", confined=True),  # seccomp: itself only
    Case("setsid_escape", "step", "timeout", r"'step' took longer than 2s", confined=True),
]
# Failures after which the worker process is still alive (the env raised; nothing was killed).
ALIVE_AFTER = {"exception", "memory", "invalid_reward", "not_json"}


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
    with pytest.raises(SandboxFailure, match="PermissionError"):
        worker.call("step", action=STEP)
    state = worker.call("observe", want_state=True)["state"]
    # getppid() is 0 outside the PID namespace: kill(0) would be the process group, unshare's too.
    assert state["attempts"] == ["parent: PermissionError", "pid 1: sent", "own group: PermissionError"], state
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
