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
