"""Env code and learned agent code reach no other process (issue 34, item 2): every call that names
another process — its limits (prlimit64), priority, I/O priority, scheduling, memory, a handle on
it, a signal, its System V segment — fails with EPERM on every rung, as root and as a normal user,
and the process is left as it was. Calls a process makes of itself still work.

Each run is a driver (standing in for envforge) started on one rung, as root or as uid 65534 (the
ladder test's way: test_confinement_ladder.VIEW, `setpriv`). It starts a victim, an unrelated process
of its own uid holding a System V segment, writes both pids into the hostile env's folder
(tests/hostile/reach_processes/target.json), runs the env's step and the same calls from a learned
agent (agent.py, host="agent"), and reports what each call got and what it sees of both processes
(their /proc/PID/limits, nice value, CPU affinity, scheduler, I/O priority, state) before and after.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sandbox_kit import HOSTILE
from test_confinement_ladder import AVAILABLE, NOBODY, VIEW, _needed_paths

from envforge.pipeline.sandbox.inside.syscalls import seccomp_available

pytestmark = pytest.mark.skipif(not seccomp_available()[0], reason=f"no seccomp here: {seccomp_available()[1]}")

ROOT = Path(__file__).resolve().parent.parent

DRIVER = r"""
import ctypes, json, os, subprocess, sys
env = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
# The victim dies with the driver (PR_SET_PDEATHSIG) and holds none of its output pipes.
VICTIM = ("import ctypes, sys, time\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.prctl(1, 9)\n"
          "print(libc.shmget(0, 4096, 0o600), flush=True)\ntime.sleep(900)\n")
victim = subprocess.Popen([sys.executable, "-c", VICTIM], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          start_new_session=True)
shm_id = int(victim.stdout.readline())
import pyseccomp
IOPRIO_GET = pyseccomp.resolve_syscall(pyseccomp.system_arch(), "ioprio_get")


def seen(pid):
    limits = [line.split("  ")[0] + ": " + " ".join(line[25:].split())
              for line in open(f"/proc/{pid}/limits") if line.startswith(("Max open files", "Max cpu time"))]
    return {"limits": limits, "nice": os.getpriority(os.PRIO_PROCESS, pid),
            "affinity": sorted(os.sched_getaffinity(pid)), "scheduler": os.sched_getscheduler(pid),
            "ioprio": libc.syscall(IOPRIO_GET, 1, pid),
            "state": open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]}


aims = {"victim": {"pid": victim.pid, "signal": 19}, "envforge": {"pid": os.getpid(), "signal": 0}}
open(os.path.join(env, "target.json"), "w").write(json.dumps({"aims": aims, "shm_id": shm_id}))
before = {name: seen(aim["pid"]) for name, aim in aims.items()}
from envforge.pipeline.sandbox import SandboxLimits, Worker
limits = SandboxLimits(call_seconds=60, cpu_seconds=60)
with Worker(env, limits) as worker:
    worker.call("reset", level="levels/level_01.yaml")
    worker.call("step", action={"action": "go", "params": {}})
    from_env = worker.call("observe", want_state=True)["state"]["found"]
    confinement = worker.confinement
with Worker(env, limits, host="agent") as agent:
    agent.call("start", env={"name": "reach_processes"})
    from_agent = json.loads(agent.call("act", turn={"step": 1})["thought"])
after = {name: seen(aim["pid"]) for name, aim in aims.items()}
segment = (ctypes.c_char * 256)()
shm_kept = libc.shmctl(shm_id, 2, segment) >= 0  # IPC_STAT
victim.kill()
libc.shmctl(shm_id, 0, None)  # IPC_RMID
print(json.dumps({"uid": os.getuid(), "confinement": confinement, "env": from_env, "agent": from_agent,
                  "before": before, "after": after, "shm_kept": shm_kept}))
"""

ROOT_RUNS = [(rung, uid) for rung in ("namespaces", "userns", "landlock") for uid in (0, NOBODY)
             if not (rung == "namespaces" and uid)]  # the root rung is root's alone
# As a normal user the driver runs as that user, on the rungs a normal user has.
RUNS = ROOT_RUNS if os.geteuid() == 0 else [(rung, os.geteuid()) for rung in ("userns", "landlock")]
# One xdist group a run: its tests share the run's report, made once in their process.
RUN_PARAMS = [pytest.param(r, u, id=(name := f"{r}-{'root' if u == 0 else f'uid{u}'}"),
                           marks=pytest.mark.xdist_group(f"reach-{name}")) for r, u in RUNS]
CALLS = ("prlimit64 nofile", "prlimit64 cpu", "prlimit64 read", "setpriority process", "setpriority group",
         "setpriority user", "ioprio_set process", "ioprio_set user", "sched_setaffinity", "sched_setscheduler",
         "sched_setparam", "sched_setattr", "get_robust_list", "process_vm_readv", "process_vm_writev", "kcmp",
         "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
         "pidfd_getfd", "process_madvise", "process_mrelease", "migrate_pages", "move_pages", "shmctl remove",
         "shmget", "semget", "msgget", "mq_open")


def report(rung: str, uid: int) -> dict:
    """The driver's report for one run (made once, shared by the tests of that run); a run that
    failed fails each of its tests with what it printed."""
    if not AVAILABLE[rung].available:
        pytest.skip(f"{rung} not available here: {AVAILABLE[rung].detail}")
    outcome = _run(rung, uid)
    if isinstance(outcome, str):
        pytest.fail(outcome)
    return outcome


@functools.cache
def _run(rung: str, uid: int) -> dict | str:
    folder = Path(tempfile.mkdtemp(prefix="envforge-reach-"))
    try:
        os.chmod(folder, 0o755)
        env = folder / "reach_processes"
        shutil.copytree(HOSTILE / "reach_processes", env)
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, uid, uid)
        argv = [sys.executable, "-c", DRIVER, str(env)]
        if uid != os.geteuid():
            argv = ["unshare", "--mount", sys.executable, "-c", VIEW, "\n".join(_needed_paths()),
                    "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] + argv
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "TMPDIR": "/tmp",
                       "ENVFORGE_CONFINEMENT": rung}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=folder, env=environment)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if done.returncode != 0:
        return f"the driver failed (status {done.returncode}): {done.stdout}{done.stderr}"
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if (found["uid"], found["confinement"]) != (uid, rung):
        return f"expected the driver as uid {uid} on {rung}, found uid {found['uid']} on {found['confinement']}"
    return found


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("rung,uid", RUN_PARAMS)
def test_a_call_that_reaches_another_process_fails_with_eperm_and_changes_nothing(rung: str, uid: int, call: str):
    found = report(rung, uid)
    got = {(code, aim): found[code][aim][call] for code in ("env", "agent") for aim in ("victim", "envforge")}
    assert got == {key: "EPERM" for key in got}, got
    # What a user sees of both processes: limits, priorities, scheduling, state; the segment is there.
    assert found["after"] == found["before"]
    assert found["after"]["victim"]["state"] == "S" and found["shm_kept"]


@pytest.mark.parametrize("rung,uid", RUN_PARAMS)
def test_calls_a_process_makes_of_itself_still_work(rung: str, uid: int):
    found = report(rung, uid)
    for code in ("env", "agent"):
        assert found[code]["own"] == {name: "ok" for name in found[code]["own"]}, (code, found[code]["own"])
        assert len(found[code]["own"]) == 6
        if rung in ("namespaces", "userns"):
            assert found[code]["pid"] == 1  # its own pid is the PID namespace's
