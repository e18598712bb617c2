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
"""
from __future__ import annotations

import ctypes
import errno

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
}
AF_UNIX = 1
# Calls that send a signal (the first argument names whom): only the worker itself may be signalled.
SIGNALLING = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
KEYCTL_JOIN_SESSION_KEYRING = 1

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
    import os

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
    if _number("pidfd_send_signal") is not None:
        syscall_filter.add_rule(eperm, "pidfd_send_signal")
    # No new process or thread, whatever the uid (RLIMIT_NPROC does not bind uid 0, which a worker
    # is on the userns and landlock rungs when envforge runs as root): EAGAIN, as at a process limit.
    for name in ("clone", "fork", "vfork"):
        if _number(name) is not None:
            syscall_filter.add_rule(_seccomp.ERRNO(errno.EAGAIN), name)
    if _number("clone3") is not None:
        syscall_filter.add_rule(_seccomp.ERRNO(errno.ENOSYS), "clone3")
    syscall_filter.load()
    return denied
