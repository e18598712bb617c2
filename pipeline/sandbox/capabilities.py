"""What the sandbox can enforce on this machine (also reported by `envforge doctor`)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess

UNSHARE_ARGS = ("unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc")


@functools.lru_cache(maxsize=1)
def capabilities() -> dict:
    """Namespaces mode needs root (to give each worker a uid of its own) and `unshare`."""
    reason = ""
    if os.geteuid() != 0:
        reason = "not running as root: no uid of its own per worker, no namespaces"
    elif not shutil.which("unshare"):
        reason = "util-linux 'unshare' not found"
    else:
        probe = subprocess.run(list(UNSHARE_ARGS) + ["true"], capture_output=True, timeout=10)
        if probe.returncode != 0:
            reason = f"unshare refused: {probe.stderr.decode(errors='replace').strip()}"
    full = not reason
    return {
        "mode": "namespaces" if full else "plain",
        "network_cut": full,
        "write_confinement": full,
        "filesystem_view": "minimal chroot: system dirs read-only, /env read-write, private /tmp" if full else "whole host",
        "process_limit": full,
        "pid_namespace": full,
        "credentials_stripped": True,
        "resource_limits": True,
        "reason": reason,
    }


def enforcement() -> list[tuple[str, bool, str]]:
    """What a worker gets here, one mechanism a row: (name, enforced, what it is or why not)."""
    from pipeline.sandbox.limits import Limits
    from pipeline.sandbox.syscalls import DENIED, seccomp_available

    caps = capabilities()
    full = caps["mode"] == "namespaces"
    why_not = caps["reason"]
    seccomp, seccomp_reason = seccomp_available()
    lim = Limits()
    return [
        ("namespaces", full, "network, mount and PID namespaces of its own (no network)" if full else why_not),
        ("chroot", full, "minimal root: system dirs read-only, /env an overlay of the folder's copy" if full else why_not),
        ("uid", full, "a uid of its own (200000+), no groups, RLIMIT_NPROC=1: no fork, no threads" if full else why_not),
        ("rlimits", True, f"CPU, address space {lim.memory_mb} MB, file size {lim.file_size_mb} MB, "
                          f"{lim.open_files} open files; wall clock per call; output {lim.output_kb} KB"),
        ("no_new_privs", full or seccomp, "set before the env's code runs" if full or seccomp else why_not),
        ("tmpfs quota", full, f"/env changes and /tmp: {lim.disk_mb} MB, {lim.disk_inodes} inodes" if full else why_not),
        ("keyring", seccomp, "a fresh, empty session keyring" if seccomp else seccomp_reason),
        ("seccomp", seccomp, f"EPERM for {len(DENIED)} calls: {', '.join(DENIED)}; clone with a namespace flag"
                             if seccomp else seccomp_reason),
        ("folder copy", True, "no links, no special files; capped at "
                              f"{lim.folder_mb} MB and {lim.folder_files} entries"),
    ]
