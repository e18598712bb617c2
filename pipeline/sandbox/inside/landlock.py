"""Landlock for the landlock rung (see capabilities.py): after `restrict`, this process and what it
starts may read (and execute) only beneath `readable`, and read and write only beneath `writable`;
every other path, /proc included, is refused with EACCES. With ABI 4+ TCP bind and connect are
refused too, and with ABI 6+ signals and abstract UNIX sockets cannot reach outside the domain.

Written against the kernel's UAPI (linux/landlock.h) through ctypes: three system calls, no library.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform

LANDLOCK_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}  # create_ruleset, add_rule, restrict_self

# File-system rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may hold
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (or the call is refused). The host
    asks it too, to choose the rung (capabilities.ladder)."""
    numbers = LANDLOCK_SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    return max(abi, 0)


def _handled_fs(abi: int) -> int:
    rights = ABI1_ALL
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict(readable: list[str], writable: list[str]) -> int:
    """Confine this process for good; returns the ABI used. Paths that do not exist are skipped."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available")
    create, add_rule, restrict_self = LANDLOCK_SYSCALLS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    handled = _handled_fs(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        read = READ_FILE | READ_DIR | EXECUTE
        for paths, rights in ((readable, read), (writable, handled)):
            for path in paths:
                _allow(libc, add_rule, ruleset, path, rights)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(restrict_self, ruleset, ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    return abi


def _allow(libc, add_rule: int, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        if libc.syscall(add_rule, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
    finally:
        os.close(fd)
