"""Root's userns rung: a user namespace whose uid 0 is root (so the worker builds its minimal root
exactly as on the namespaces rung: the same binds, the same overlay) and whose uid 1 is the
worker's own unprivileged uid outside, which the worker becomes before any environment code runs.

`unshare --map-root-user` maps one uid: the caller's. For root that makes the worker uid 0 of the
host, owner of /etc/shadow and of every 0600 file root has — readable without any capability.
A second line in the map needs CAP_SETUID (CAP_SETGID for the gid map) in the parent namespace,
which envforge has as root (Docker's default capabilities keep them) and the worker, once in its
own namespace, has not: so envforge writes the maps itself while the worker waits
(inside/enter_userns.py), then lets it exec `unshare` for the other namespaces.
"""
from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

ENTRY = str(Path(__file__).resolve().parents[1] / "inside" / "enter_userns.py")
INNER_UID = 1  # the worker's uid inside its user namespace, mapped to its own uid outside


TIMED_OUT = "timeout"


class MapFailed(OSError):
    """The user namespace could not be made or mapped; the message says which step and why."""


def start(argv: list[str], uid: int, seconds: float, **popen) -> tuple[subprocess.Popen, str]:
    """`argv` (an `unshare` command for the other namespaces) in a user namespace mapping 0 to
    root and INNER_UID to `uid` (the gid alike): the process, and "" — or why its namespace or maps
    could not be made (TIMED_OUT: not within `seconds`), the process then gone."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    fds = tuple(popen.pop("pass_fds", ())) + (ready_w, go_r)
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", ENTRY, str(ready_w), str(go_r)] + argv,
                                pass_fds=fds, **popen)
    finally:
        os.close(ready_w)
        os.close(go_r)
    problem = ""
    try:
        said = _read(ready_r, seconds)
        if said is None:
            raise MapFailed(TIMED_OUT)
        if said != b"+":
            said = said.decode(errors="replace")[:200]
            raise MapFailed(said or "the launcher exited before it made a user namespace")
        for name in ("uid_map", "gid_map"):
            try:
                with open(f"/proc/{proc.pid}/{name}", "w") as f:
                    f.write(f"0 0 1\n{INNER_UID} {uid} 1\n")
            except OSError as e:
                raise MapFailed(f"writing {name} ({'CAP_SETUID' if name == 'uid_map' else 'CAP_SETGID'} needed): "
                                f"{e.strerror}") from None
        os.write(go_w, b"+")
    except MapFailed as e:
        problem = str(e)
    finally:
        os.close(ready_r)
        os.close(go_w)
        if problem or sys.exc_info()[0] is not None:
            proc.kill()
            proc.wait()
    return proc, problem


def _read(fd: int, seconds: float) -> bytes | None:
    """What the launcher said, or None when it said nothing within `seconds`."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            return os.read(fd, 512)
    return None


def probe(launcher: tuple[str, ...], uid: int) -> str:
    """"" when root's userns worker (as `uid` outside) can be started here; else why not."""
    try:
        proc, problem = start(list(launcher) + ["true"], uid=uid, seconds=10,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as e:
        return f"cannot start {sys.executable}: {e}"
    if problem:
        return "unshare did not start within 10s" if problem == TIMED_OUT else problem
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "unshare did not finish within 10s"
    if proc.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        return f"unshare refused: {said[-1] if said else f'exit status {proc.returncode}'}"
    return ""
