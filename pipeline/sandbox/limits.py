"""What a sandbox worker may use, and the environment variables it gets."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

# Exit status a worker uses when its CPU budget runs out (it is PID 1 of its namespace,
# where the kernel's default SIGXCPU action does not apply).
EXIT_CPU = 90
# Exit status of a worker that outlived its own deadline for a call (its parent is gone).
EXIT_ALARM = 91


@dataclass(frozen=True)
class SandboxLimits:
    call_seconds: float = 10.0  # wall clock for one call of the env's code (load, reset, step, ...)
    # Wall clock for a worker to start: the process spawned, confined and envforge's own worker code
    # imported, up to its "started" message; no environment code has run yet. A safety stop, not a
    # verdict: when it fires it is an infrastructure fault (outside/failures.WorkerStartFailed).
    start_seconds: float = 120.0
    # Wall clock for one call of the env's level generator (a reset that generates a level) or its
    # validator, instead of call_seconds: both may search a level's whole space (one AutoEnv
    # generator runs a depth-30 breadth-first search per level, 2 s idle and over 10 s on a busy
    # machine), so a call limit sized for a step would make the verdict depend on machine load. A
    # safety stop: a call it cuts fails as "safety_stop" (failures.KINDS), named so in the verdict.
    generator_seconds: float = 120.0
    cpu_seconds: int = 120  # CPU for the worker's whole life
    memory_mb: int = 1024  # address space
    file_size_mb: int = 16  # largest file the worker may write
    open_files: int = 64
    output_kb: int = 1024  # stdout + stderr over the worker's life; more kills it
    message_mb: int = 32  # largest reply
    # What it may write: changes to its folder and its tmp, together, in bytes and in files and
    # folders it creates; past either it is ended as "disk_quota" (outside/quota.py).
    disk_mb: int = 64
    disk_inodes: int = 8192
    folder_mb: int = 512  # largest environment folder copied into the sandbox
    folder_files: int = 10_000  # most files and folders in it

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def disk_bound(self) -> tuple[int, int]:
        """(MB, inodes) of the tmpfs holding a namespaced worker's writable places: a little above its
        quota, so that the host sees it crossed (and names the cause), while the kernel bounds what it
        writes between two of the host's looks. 64 inodes: the tmpfs's own folders."""
        return self.disk_mb + max(4, self.disk_mb // 8), self.disk_inodes + max(64, self.disk_inodes // 8) + 64


# Allowlist: a worker sees only these variables, whatever the parent holds.
_PASS_THROUGH = ("LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def secret_looking(name: str) -> bool:
    """A variable whose name says it may hold a secret (an API key, a token, a password)."""
    return any(marker in name.upper() for marker in _SECRET_MARKERS)


def worker_environment(home: str) -> dict[str, str]:
    """`home`: the worker's tmp folder, its HOME and TMPDIR too."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "PYTHONHASHSEED": "0",  # set iteration order must not vary between runs
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name in _PASS_THROUGH:
        if name in os.environ:
            env[name] = os.environ[name]
    return {k: v for k, v in env.items() if not secret_looking(k)}
