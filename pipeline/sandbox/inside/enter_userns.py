"""The first step of root's worker on the userns rung (outside/userns.py starts it): enter a new
user namespace, wait until envforge has written its uid and gid maps (uid 0 -> 0 so the worker
can still build its root, uid 1 -> the worker's own uid, which it then becomes), exec the rest.

Run as a script (`python -I -S this-file READY_FD GO_FD ARGV...`), never imported: the standard
library only, no site, no envforge package, so it costs one bare interpreter start.
"""
import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000


def main() -> None:
    ready, go = int(sys.argv[1]), int(sys.argv[2])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        os.write(ready, f"unshare refused: unshare(CLONE_NEWUSER): {os.strerror(ctypes.get_errno())}".encode())
        sys.exit(1)
    os.write(ready, b"+")
    os.close(ready)
    if os.read(go, 1) != b"+":  # envforge could not map it, or is gone
        sys.exit(1)
    os.close(go)
    os.execvp(sys.argv[3], sys.argv[3:])


if __name__ == "__main__":
    main()
