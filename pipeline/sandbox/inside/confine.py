"""Worker-side confinement, run by the worker before it loads any environment code; one branch per
rung of the ladder (capabilities.py says which rung a machine gets and why).

"namespaces" (root) and "userns" (any user) — the worker was started by `unshare` (in a user
namespace for userns: see userns.py) in network, mount and PID namespaces of its own. It builds a
minimal root file system in a tmpfs — read-only binds of the system and Python directories, a
private /tmp, /dev/null & co, a fresh /proc and the environment at /env: an overlay of the
(shared, read-only) copy of its folder under a private writable layer. That layer and /tmp live
on one tmpfs capped in size and inodes, so whatever the env writes is bounded and vanishes with
its mount namespace (the host watches it against the quota: outside/quota.py); the root's own
tmpfs is read-only. It chroots into it and sets resource limits.

"landlock" — no namespace: resource limits, then Landlock limits file access to read-only system
and Python paths and the worker's own folder copy and tmp (see landlock.py).

"none" (the --unconfined opt-in) — only resource limits, no capabilities, and what follows.

Every rung, and "none" where libseccomp is present: the worker first joins a fresh, empty session
keyring and then loads the seccomp filter of syscalls.py. Last, on every rung, it takes the uid
environment code runs as (`--uid`, chosen by the parent: process.WorkerProcess): a uid of its own
that owns no file (200000+; uid 1 of its user namespace on the userns rung, mapped to one) when
envforge is root, with no groups and no capabilities; else it stays the uid it is (yours; root of
its own user namespace on the userns rung) and gives up every capability. Root's worker never
runs environment code as uid 0 on any rung: uid 0 owns /etc/shadow and every 0600 file of root,
and reading what one owns needs no capability. RLIMIT_NPROC=1 on every rung: no fork, no threads
(on the landlock rung as a normal user it binds because the user has other processes).
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

from envforge.pipeline.sandbox.limits import EXIT_CPU, SandboxLimits
from envforge.pipeline.sandbox.protocol import ENV_MOUNT

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 38, 24, 28, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, _NOROOT_LOCKED, _NO_SETUID_FIXUP, _NO_SETUID_FIXUP_LOCKED, _KEEP_CAPS_LOCKED: uid 0
# gets no capabilities back from an exec.
SECURE_BITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20
# statvfs flag -> mount flag, for flags a remount must keep (in a user namespace they are locked).
_KEPT_FLAGS = {2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: 1024, 2048: 2048, 4096: 1 << 21}
DEVICE_RIGHTS = {"null": True, "zero": False, "random": False, "urandom": False}  # name -> writable

SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
DEVICES = ("null", "zero", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind(source: str, target: str, readonly: bool) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    kept = os.statvfs(source).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (MS_RDONLY if readonly else 0)
    flags |= sum(ms for st, ms in _KEPT_FLAGS.items() if kept & st)
    _mount(None, target, None, flags)


def readable_paths() -> list[str]:
    """What the worker must read: the interpreter's prefixes, site-packages and envforge's own
    packages — not the checkout around them, where a `.env` file with keys may sit."""
    from envforge import dsl_schema, pipeline

    paths = {sys.base_prefix, sys.prefix}
    # envforge's parts: one folder installed; in an editable install, the checkout's top-level folders
    root = sys.modules[__name__.split(".")[0]]  # the import root (envforge), imported before this module
    paths.update(os.path.dirname(m.__file__) for m in (root, pipeline, dsl_schema))
    paths.update(p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p))
    paths = sorted(os.path.realpath(p) for p in paths)
    # Drop paths already inside another kept path or a system directory.
    out: list[str] = []
    for p in paths:
        covered = any(p == k or p.startswith(k.rstrip("/") + "/") for k in out + list(SYSTEM_DIRS))
        if not covered:
            out.append(p)
    return out


def build_root(root: str, rw: str, folder: str, uid: int, limits: SandboxLimits) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    size_mb, inodes = limits.disk_bound
    _mount("tmpfs", rw, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=700,size={size_mb}m,nr_inodes={inodes}")
    for name in ("upper", "work", "tmp"):
        os.mkdir(os.path.join(rw, name))
    os.chown(os.path.join(rw, "upper"), uid, uid)
    os.chmod(os.path.join(rw, "tmp"), 0o1777)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=8m")
    # The private /tmp first: a checkout under /tmp is bound on top of it, not hidden by it.
    _bind(os.path.join(rw, "tmp"), root + "/tmp", readonly=False)
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            os.symlink(os.readlink(d), root + d)
        elif os.path.isdir(d):
            _bind(d, root + d, readonly=True)
    for p in readable_paths():
        _bind(p, root + p, readonly=True)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in DEVICES:
        if os.path.exists("/dev/" + dev):
            _bind("/dev/" + dev, f"{root}/dev/{dev}", readonly=False)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(root + ENV_MOUNT)
    _mount("overlay", root + ENV_MOUNT, "overlay", MS_NOSUID | MS_NODEV,
           f"lowerdir={folder},upperdir={rw}/upper,workdir={rw}/work")
    # The root's own tmpfs read-only (8 MB outside the quota, made by the worker while it was root):
    # what it may write is the quota's tmpfs alone (/env's upper layer and /tmp).
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(root)
    os.chdir(ENV_MOUNT)


def set_limits(limits: SandboxLimits, single_process: bool) -> None:
    mb = 1024 * 1024
    cpu = int(limits.cpu_seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mb, limits.file_size_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if single_process:
        # With a uid of its own, 1 means: no fork, no threads, nothing left behind.
        resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
    # PID 1 of a namespace ignores default-action signals; exit with a status we recognise.
    signal.signal(signal.SIGXCPU, lambda *_: os._exit(EXIT_CPU))


def become(uid: int) -> None:
    """Become `uid` (and gid `uid`) for good, from root: no supplementary groups, an empty bounding
    and ambient set, no capabilities (the kernel clears them when every uid leaves 0), no_new_privs.
    Checked: a capability left is an error, not a worker."""
    for cap in range(64):  # while this process may still (CAP_SETPCAP); EINVAL past the last one
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 1:  # EPERM
            raise OSError(1, f"prctl(PR_CAPBSET_DROP, {cap})")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    left = _capabilities()
    if any(left):
        raise OSError(f"expected no capabilities as uid {uid}, found effective/permitted/inheritable {left}")


def _capabilities() -> list[int]:
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if _libc.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    return [data[i] | data[i + 3] << 32 for i in range(3)]


def drop_capabilities() -> None:
    """Give up every capability for good, staying the same uid (root of a user namespace, or root
    with no rung): the bounding set, the ambient set, the three sets of this process, and no way
    back through an exec. A process with none to give up only sets no_new_privs."""
    if os.geteuid() == 0:
        if _libc.prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS)")
        for cap in range(64):
            if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 1:  # EPERM
                raise OSError(1, f"prctl(PR_CAPBSET_DROP, {cap})")
        _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all zero
        if _libc.capset(header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _landlock(base: str, folder: str) -> dict[str, int]:
    """The landlock rung's file access: Landlock over what the worker may read and write. Returns
    the Python paths opened for `serve_imports` (see there)."""
    from envforge.pipeline.sandbox.inside import landlock

    python = readable_paths()
    readable = list(SYSTEM_DIRS) + python + [f"/dev/{d}" for d, w in DEVICE_RIGHTS.items() if not w]
    writable = [folder, os.path.join(base, "tmp")] + [f"/dev/{d}" for d, w in DEVICE_RIGHTS.items() if w]
    os.chdir(folder)
    kept = {}
    if os.geteuid() == 0:
        for path in python:
            try:
                kept[path] = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                pass
    landlock.restrict(readable, writable)
    return kept


def serve_imports(kept: dict[str, int]) -> None:
    """After root's landlock worker becomes a uid of its own, Python must still import from the
    interpreter, site-packages and envforge (readable_paths), which may sit under a folder only root
    may enter (a pyenv or a venv under /root, mode 0700). Each was opened (O_PATH) while still root:
    a walk through /proc/self/fd/N starts at that folder, past the folders above it; every file's own
    mode and Landlock still apply. A path hook serves every import path under one the new uid cannot
    enter through its descriptor; paths it can enter are left to Python's own finder."""
    from importlib.machinery import (
        BYTECODE_SUFFIXES,
        EXTENSION_SUFFIXES,
        SOURCE_SUFFIXES,
        ExtensionFileLoader,
        FileFinder,
        SourceFileLoader,
        SourcelessFileLoader,
    )

    blocked = {}
    for path, fd in kept.items():
        if os.access(path, os.R_OK | os.X_OK):
            os.close(fd)
        else:
            blocked[path.rstrip("/") + "/"] = fd
    if not blocked:
        return
    loaders = [(ExtensionFileLoader, EXTENSION_SUFFIXES), (SourceFileLoader, SOURCE_SUFFIXES),
               (SourcelessFileLoader, BYTECODE_SUFFIXES)]

    def through_descriptor(path: str) -> FileFinder:
        inside = path.rstrip("/") + "/"
        for folder, fd in blocked.items():
            if inside.startswith(folder):
                alias = f"/proc/self/fd/{fd}/{inside[len(folder):]}".rstrip("/")
                if os.path.isdir(alias):
                    return FileFinder(alias, *loaders)
        raise ImportError(f"{path}: not under a folder kept for imports")  # Python's own finder then

    sys.path_hooks.insert(0, through_descriptor)
    sys.path_importer_cache.clear()


def confine(mode: str, base: str, folder: str, uid: int, limits: SandboxLimits) -> str:
    """Confine this process on the rung `mode`; return the environment folder's path as seen
    afterwards. `folder`: the host's copy of the environment folder; `uid`: the uid environment code
    runs as (as this process will see it), which it becomes last, unless it is that uid already."""
    from envforge.pipeline.sandbox.inside import syscalls  # loads libseccomp: only workers need it

    seccomp, why = syscalls.seccomp_available()
    if mode != "none" and not seccomp:
        raise OSError(f"the {mode} rung needs seccomp: {why}")
    if seccomp:
        syscalls.fresh_session_keyring()
    kept: dict[str, int] = {}
    if mode in ("namespaces", "userns"):
        build_root(os.path.join(base, "root"), os.path.join(base, "rw"), folder, uid, limits)
        set_limits(limits, single_process=True)
    elif mode == "landlock":
        set_limits(limits, single_process=True)
        kept = _landlock(base, folder)
    elif mode == "none":
        os.chdir(folder)
        set_limits(limits, single_process=False)
    else:
        raise ValueError(f"confinement: expected one of namespaces, userns, landlock, none, found {mode!r}")
    if seccomp:
        syscalls.deny_syscalls(unix_sockets=mode != "landlock")
    if uid != os.getuid():
        become(uid)
        serve_imports(kept)
    else:
        drop_capabilities()
    return ENV_MOUNT if mode in ("namespaces", "userns") else folder
