"""Every system call that reaches another process, aimed at each pid of target.json (written beside
this file by the test: an unrelated process of the same uid, and envforge itself), and the same
calls aimed at the caller itself, which must still work. Each attempt records "ok" or the errno's
name. Shared by env_main.py and agent.py: environment code and learned agent code get one filter.
"""
import ctypes
import errno
import json
import os
from pathlib import Path

import pyseccomp  # only to name the calls' numbers on this architecture

RLIMIT_CPU, RLIMIT_NOFILE = 0, 7
PRIO_PROCESS, PRIO_PGRP, PRIO_USER = 0, 1, 2
IOPRIO_WHO_PROCESS, IOPRIO_WHO_USER, IOPRIO_IDLE = 1, 3, 3 << 13
SCHED_IDLE, SIGSTOP, KCMP_VM, MADV_COLD = 5, 19, 1, 20
IPC_PRIVATE, IPC_RMID, O_CREAT_RDWR = 0, 0, 0o102

_libc = ctypes.CDLL(None, use_errno=True)
_arch = pyseccomp.system_arch()


def _call(name, *args):
    number = pyseccomp.resolve_syscall(_arch, name)
    result = _libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def _reach(pid, signal, shm_id):
    """name -> what the kernel answered, for each call aimed at `pid` (`signal`: the one to send it;
    `shm_id`: a System V segment of another process)."""
    limit = (ctypes.c_uint64 * 2)(3, 3)
    cpu = (ctypes.c_uint64 * 2)(1, 1)
    out = (ctypes.c_uint64 * 2)()
    mask = ctypes.c_uint64(1)
    param = ctypes.c_int(0)
    attr = (ctypes.c_uint32 * 14)(56, SCHED_IDLE)  # struct sched_attr: size, policy, the rest 0
    word = ctypes.c_uint64()
    local = (ctypes.c_uint64 * 2)(ctypes.addressof(word), 8)
    remote = (ctypes.c_uint64 * 2)(0x400000, 8)
    nodes = ctypes.c_uint64(1)
    page = ctypes.c_void_p(0x400000)
    status = ctypes.c_int()
    info = (ctypes.c_int * 32)(signal, 0, -1)  # si_signo, si_errno, si_code SI_QUEUE
    return {
        "prlimit64 nofile": _call("prlimit64", pid, RLIMIT_NOFILE, limit, None),
        "prlimit64 cpu": _call("prlimit64", pid, RLIMIT_CPU, cpu, None),
        "prlimit64 read": _call("prlimit64", pid, RLIMIT_NOFILE, None, out),
        "setpriority process": _call("setpriority", PRIO_PROCESS, pid, 19),
        "setpriority group": _call("setpriority", PRIO_PGRP, pid, 19),
        "setpriority user": _call("setpriority", PRIO_USER, 0, 19),
        "ioprio_set process": _call("ioprio_set", IOPRIO_WHO_PROCESS, pid, IOPRIO_IDLE),
        "ioprio_set user": _call("ioprio_set", IOPRIO_WHO_USER, 0, IOPRIO_IDLE),
        "sched_setaffinity": _call("sched_setaffinity", pid, 8, ctypes.byref(mask)),
        "sched_setscheduler": _call("sched_setscheduler", pid, SCHED_IDLE, ctypes.byref(param)),
        "sched_setparam": _call("sched_setparam", pid, ctypes.byref(param)),
        "sched_setattr": _call("sched_setattr", pid, attr, 0),
        "get_robust_list": _call("get_robust_list", pid, ctypes.byref(word), ctypes.byref(nodes)),
        "process_vm_readv": _call("process_vm_readv", pid, local, 1, remote, 1, 0),
        "process_vm_writev": _call("process_vm_writev", pid, local, 1, remote, 1, 0),
        "kcmp": _call("kcmp", os.getpid(), pid, KCMP_VM, 0, 0),
        "kill": _call("kill", pid, signal),
        "tkill": _call("tkill", pid, signal),
        "tgkill": _call("tgkill", pid, pid, signal),
        "rt_sigqueueinfo": _call("rt_sigqueueinfo", pid, signal, info),
        "rt_tgsigqueueinfo": _call("rt_tgsigqueueinfo", pid, pid, signal, info),
        "pidfd_open": _call("pidfd_open", pid, 0),
        "pidfd_send_signal": _call("pidfd_send_signal", 0, SIGSTOP, None, 0),
        "pidfd_getfd": _call("pidfd_getfd", 0, 0, 0),
        "process_madvise": _call("process_madvise", 0, local, 1, MADV_COLD, 0),
        "process_mrelease": _call("process_mrelease", 0, 0),
        "migrate_pages": _call("migrate_pages", pid, 64, ctypes.byref(nodes), ctypes.byref(nodes)),
        "move_pages": _call("move_pages", pid, 1, ctypes.byref(page), None, ctypes.byref(status), 0),
        "shmctl remove": _call("shmctl", shm_id, IPC_RMID, None),
        "shmget": _call("shmget", IPC_PRIVATE, 4096, 0o600),
        "semget": _call("semget", IPC_PRIVATE, 1, 0o600),
        "msgget": _call("msgget", IPC_PRIVATE, 0o600),
        "mq_open": _call("mq_open", b"envforge-reach", O_CREAT_RDWR, 0o600, None),
    }


def _own():
    """The calls a process makes of itself, which the filter must let through."""
    out = (ctypes.c_uint64 * 2)()
    me = os.getpid()
    return {
        "prlimit64 of pid 0": _call("prlimit64", 0, RLIMIT_NOFILE, None, out),
        "prlimit64 of its own pid": _call("prlimit64", me, RLIMIT_NOFILE, None, out),
        "setpriority of itself": _call("setpriority", PRIO_PROCESS, 0, 1),
        "ioprio_get of itself": _call("ioprio_get", IOPRIO_WHO_PROCESS, me),
        "sched_getaffinity of itself": "ok" if os.sched_getaffinity(0) else "empty",
        "kill of itself": _call("kill", me, 0),
    }


def attempts():
    target = json.loads((Path(__file__).parent / "target.json").read_text())
    return {"pid": os.getpid(), "own": _own(),
            **{name: _reach(aim["pid"], aim["signal"], target["shm_id"]) for name, aim in target["aims"].items()}}
