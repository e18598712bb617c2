"""The worker's last two locks: a fresh, empty kernel keyring, and a seccomp filter.

Keyring: under a login session (pam_keyinit, systemd services) envforge's session keyring may hold
keys; a worker inherits it unless it joins a new, empty one — which it does while still root.

Seccomp: once the worker has dropped its privileges, a filter (libseccomp, through pyseccomp) makes
the system calls below fail with EPERM. An environment has no business making any of them; most
are already refused to an unprivileged uid, and the filter is the second wall for a kernel bug.
`clone3` fails with ENOSYS instead, so the C library falls back to `clone`, which (like fork and
vfork) fails with EAGAIN: a worker starts no process or thread, whatever its uid (RLIMIT_NPROC=1
says the same where it binds). Sockets of any family but AF_UNIX, and signals to any process but
the worker itself, are refused too (see deny_syscalls).

Other processes: a call that names a process by its pid (OWN_PROCESS: resource limits, priority,
I/O priority, scheduling, the robust-futex list) may name only the worker itself — pid 0 ("the
caller") or its own pid, which under a PID namespace is the namespace's — else EPERM. On the
landlock rung (no PID namespace) the worker shares the host's pids and, as root or as envforge's own
uid, the kernel would let it lower envforge's limits, or any same-uid process's. libseccomp cannot
say "this argument is one of two values" in one rule, so these calls get a second, small BPF filter
of their own (_own_process_program); a stacked filter can only refuse more. Calls that reach
another process through a handle or its memory (pidfd_open, process_vm_*, kcmp, process_madvise,
migrate_pages, ...) and System V / POSIX IPC (no rung has an IPC namespace: the host's segments,
semaphores and queues are shared) are in DENIED.

Compared with Docker's default profile (moby/profiles seccomp/default.json), checked against the
kernel's x86_64 table: every call it refuses to a container with the default capabilities is in
DENIED (`personality` wholly: Docker allows five values), except `clone`/`clone3` (EAGAIN/ENOSYS
here), `socket` (refused but for AF_UNIX) and six no kernel implements (getpmsg, putpmsg,
afs_syscall, tuxcall, security, vserver: ENOSYS). Docker allows what only reaches into its
own namespaces — prlimit64, setpriority, ioprio_set, sched_set*, kill, pidfd_open, IPC — which here
are limited to the worker itself or refused, since the landlock rung has no namespace.
"""
from __future__ import annotations

import ctypes
import errno
import os

# name -> why an environment must not make it (the list README's "The sandbox" documents).
DENIED = {
    "keyctl": "kernel keyring", "add_key": "kernel keyring", "request_key": "kernel keyring",
    "ptrace": "tracing other processes", "process_vm_readv": "reading another process's memory",
    "process_vm_writev": "writing another process's memory", "kcmp": "comparing other processes",
    "mount": "file systems", "umount2": "file systems", "pivot_root": "file systems", "chroot": "file systems",
    "move_mount": "file systems", "open_tree": "file systems", "fsopen": "file systems",
    "fsconfig": "file systems", "fsmount": "file systems", "fspick": "file systems",
    "mount_setattr": "file systems", "swapon": "swap", "swapoff": "swap", "quotactl": "disk quotas",
    "open_by_handle_at": "opening files by handle", "name_to_handle_at": "opening files by handle",
    "unshare": "namespaces", "setns": "namespaces",
    "bpf": "BPF programs", "perf_event_open": "performance counters", "userfaultfd": "page-fault handling",
    "init_module": "kernel modules", "finit_module": "kernel modules", "delete_module": "kernel modules",
    "kexec_load": "rebooting into another kernel", "kexec_file_load": "rebooting into another kernel",
    "reboot": "rebooting", "acct": "process accounting", "syslog": "the kernel log",
    "settimeofday": "the clock", "clock_settime": "the clock", "adjtimex": "the clock",
    "clock_adjtime": "the clock", "fanotify_init": "watching the whole file system",
    "personality": "changing the execution domain", "lookup_dcookie": "kernel profiling",
    "io_uring_setup": "asynchronous I/O that bypasses this filter", "io_uring_enter": "asynchronous I/O",
    "io_uring_register": "asynchronous I/O", "pidfd_getfd": "taking another process's files",
    "pidfd_open": "a handle on another process", "pidfd_send_signal": "signalling through a process handle",
    "process_madvise": "advising on another process's memory", "process_mrelease": "reclaiming a process's memory",
    "migrate_pages": "moving another process's memory", "move_pages": "moving another process's memory",
    "mbind": "NUMA memory policy", "set_mempolicy": "NUMA memory policy", "get_mempolicy": "NUMA memory policy",
    "set_mempolicy_home_node": "NUMA memory policy",
    **{name: "System V IPC shared with the host" for name in (
        "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
        "msgrcv", "msgctl", "ipc")},
    **{name: "POSIX message queues shared with the host" for name in (
        "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr")},
    "quotactl_fd": "disk quotas", "sethostname": "the host's name", "setdomainname": "the host's name",
    "vhangup": "terminals", "iopl": "I/O ports", "ioperm": "I/O ports", "uselib": "obsolete",
    "ustat": "obsolete", "sysfs": "obsolete", "_sysctl": "obsolete", "nfsservctl": "obsolete",
    "create_module": "obsolete", "get_kernel_syms": "obsolete", "query_module": "obsolete",
}
# Calls that name a process by its pid -> (index of the pid argument, {argument index: the one value
# it must have}): they may name the worker alone (pid 0 or its own). PRIO_PROCESS, IOPRIO_WHO_PROCESS:
# a process, not a process group or a user (envforge's uid is the worker's on the landlock rung).
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
OWN_PROCESS = {
    "prlimit64": (0, {}), "get_robust_list": (0, {}),
    "setpriority": (1, {0: PRIO_PROCESS}), "getpriority": (1, {0: PRIO_PROCESS}),
    "ioprio_set": (1, {0: IOPRIO_WHO_PROCESS}), "ioprio_get": (1, {0: IOPRIO_WHO_PROCESS}),
    **{name: (0, {}) for name in ("sched_setaffinity", "sched_getaffinity", "sched_setscheduler",
                                  "sched_getscheduler", "sched_setparam", "sched_getparam", "sched_setattr",
                                  "sched_getattr", "sched_rr_get_interval")},
}
AF_UNIX = 1
# Calls that send a signal (the first argument names whom): only the worker itself may be signalled.
SIGNALLING = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
KEYCTL_JOIN_SESSION_KEYRING = 1
PR_SET_NO_NEW_PRIVS = 38

try:
    import pyseccomp as _seccomp
except (ImportError, OSError) as exc:  # the package, or libseccomp itself, is missing
    _seccomp = None
    _MISSING = f"{type(exc).__name__}: {exc}"
else:
    _MISSING = ""

_libc = ctypes.CDLL(None, use_errno=True)


def seccomp_available() -> tuple[bool, str]:
    """(True, "") when the filter can be built here; else (False, why not)."""
    if _seccomp is None:
        return False, f"pyseccomp/libseccomp not importable ({_MISSING})"
    try:
        _seccomp.SyscallFilter(_seccomp.ALLOW)
    except Exception as exc:  # noqa: BLE001 - any failure means: not available here
        return False, f"libseccomp failed: {exc}"
    return True, ""


def _number(name: str) -> int | None:
    try:
        number = _seccomp.resolve_syscall(_seccomp.system_arch(), name)
    except Exception:  # noqa: BLE001 - unknown on this architecture
        return None
    return number if number >= 0 else None


def fresh_session_keyring() -> None:
    """Join a new, empty, anonymous session keyring (call while still root, before the filter)."""
    number = _number("keyctl") if _seccomp is not None else None
    if number is None:
        raise OSError(errno.ENOSYS, "keyctl: cannot resolve its system call number (libseccomp missing)")
    if _libc.syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        err = ctypes.get_errno()
        if err == errno.ENOSYS:
            return  # a kernel without keyrings: there is nothing to inherit
        raise OSError(err, f"keyctl(JOIN_SESSION_KEYRING): {errno.errorcode.get(err, err)}")


def deny_syscalls(unix_sockets: bool = True) -> list[str]:
    """Load the filter into this process for good; return the denied calls known on this arch.
    socket() and socketpair() fail for every family but AF_UNIX (for every family, AF_UNIX included,
    without `unix_sockets`: where no mount namespace hides the host's socket files); signals go to
    this process alone."""  # noqa: D401
    syscall_filter = _seccomp.SyscallFilter(_seccomp.ALLOW)
    denied = []
    for name in DENIED:
        if _number(name) is not None:
            syscall_filter.add_rule(_seccomp.ERRNO(errno.EPERM), name)
            denied.append(name)
    eperm = _seccomp.ERRNO(errno.EPERM)
    for name in ("socket", "socketpair"):
        if _number(name) is None:
            continue
        if unix_sockets:
            syscall_filter.add_rule(eperm, name, _seccomp.Arg(0, _seccomp.NE, AF_UNIX))
        else:
            syscall_filter.add_rule(eperm, name)
    me = os.getpid()
    for name in SIGNALLING:
        if _number(name) is not None:  # not even its process group (pid 0): `unshare` may be in it
            syscall_filter.add_rule(eperm, name, _seccomp.Arg(0, _seccomp.NE, me))
    # No new process or thread, whatever the uid (RLIMIT_NPROC does not bind uid 0, which a worker
    # is on the userns and landlock rungs when envforge runs as root): EAGAIN, as at a process limit.
    for name in ("clone", "fork", "vfork"):
        if _number(name) is not None:
            syscall_filter.add_rule(_seccomp.ERRNO(errno.EAGAIN), name)
    if _number("clone3") is not None:
        syscall_filter.add_rule(_seccomp.ERRNO(errno.ENOSYS), "clone3")
    _load_own_process_filter(me, syscall_filter, eperm)
    syscall_filter.load()
    return denied


# -- the calls that name a process: a BPF filter of their own ---------------------------------
# seccomp_data: int nr, u32 arch, u64 instruction_pointer, u64 args[6] (little-endian: low word first).
_NR, _ARCH, _ARGS = 0, 4, 16
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _own_process_program(me: int, arch: int, numbers: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """BPF: for each call of `numbers` (name -> number), EPERM unless every argument OWN_PROCESS
    names has its one value and the pid argument is 0 or `me` (both 64-bit words compared: the high
    word must be 0); every other call, and every other architecture, is left to the main filter.
    Jumps are written to labels, then resolved to the forward offsets BPF takes."""
    code: list[tuple] = [(_LD_W_ABS, 0, 0, _ARCH), (_JEQ_K, 0, "allow", arch), (_LD_W_ABS, 0, 0, _NR)]
    for block, (name, number) in enumerate(numbers.items()):
        pid_arg, fixed = OWN_PROCESS[name]
        code.append((_JEQ_K, 0, f"next{block}", number))
        for arg, values in [*((i, (v,)) for i, v in fixed.items()), (pid_arg, (0, me))]:
            code += [(_LD_W_ABS, 0, 0, _ARGS + 8 * arg + 4), (_JEQ_K, 0, "deny", 0), (_LD_W_ABS, 0, 0, _ARGS + 8 * arg)]
            code += [(_JEQ_K, f"ok{block}.{arg}", 0, v) for v in values[:-1]]
            code += [(_JEQ_K, 0, "deny", values[-1]), f"ok{block}.{arg}"]
        code += [(_RET_K, 0, 0, SECCOMP_RET_ALLOW), f"next{block}", (_LD_W_ABS, 0, 0, _NR)]
    code += ["allow", (_RET_K, 0, 0, SECCOMP_RET_ALLOW), "deny", (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)]
    labels, program = {}, []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(program)
        else:
            program.append(item)
    at = lambda jump, i: labels[jump] - i - 1 if isinstance(jump, str) else jump  # noqa: E731
    resolved = [(op, at(jt, i), at(jf, i), k) for i, (op, jt, jf, k) in enumerate(program)]
    if any(not 0 <= jump < 256 for _, jt, jf, _ in resolved for jump in (jt, jf)):
        raise ValueError(f"own-process filter: a jump does not fit BPF's 8 bits ({len(resolved)} instructions)")
    return resolved


def _load_own_process_filter(me: int, syscall_filter, eperm) -> None:
    """Load the OWN_PROCESS filter into this process; on an architecture it is not written for, have
    the main filter refuse those calls for every pid but 0 (the C library's own form) instead."""
    import platform

    numbers = {name: n for name in OWN_PROCESS if (n := _number(name)) is not None}
    arch = AUDIT_ARCH.get(platform.machine())
    if arch is None:
        for name, (pid_arg, fixed) in OWN_PROCESS.items():
            if name in numbers:
                syscall_filter.add_rule(eperm, name, _seccomp.Arg(pid_arg, _seccomp.NE, 0))
                for arg, value in fixed.items():
                    syscall_filter.add_rule(eperm, name, _seccomp.Arg(arg, _seccomp.NE, value))
        return
    program = _own_process_program(me, arch, numbers)
    instructions = (_SockFilter * len(program))(*program)
    fprog = _SockFprog(len(program), instructions)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP) for the own-process filter: {os.strerror(err)}")
