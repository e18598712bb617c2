"""The confinement ladder (issue 21): every rung contains the same hostile environment, as root and
as a normal user; with no rung, nothing runs unless opted in, and then records say so.

Each run is a driver process (standing in for envforge) started as root, or as uid 65534 through
`setpriv`, with ENVFORGE_CONFINEMENT picking the rung. The driver joins a session keyring holding
a canary key and has the canary in its own environment (its /proc/PID/environ); it runs
tests/hostile/confinement_probe in a Worker, which tries every escape and reports what it got.

How uid 65534 can run this checkout's Python at all: the interpreter, the venv and the checkout
may sit under a folder it cannot enter (here /root is 0700; CI clones anywhere). The driver is
started in a private mount namespace (`unshare --mount`, as root) where each such folder is
covered by a tmpfs holding binds of only the paths the worker needs (confine.readable_paths and
the interpreter's folder) — see `VIEW`. Nothing on the host changes; everything else under that
folder stays out of sight. The test's own files (planted secrets, the outside folder, the env
copies) are in a fresh /tmp folder owned by the uid, so that its reads and writes there would
succeed if the sandbox did not stop them.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import yaml

from pipeline.sandbox.capabilities import ladder
from sandbox_kit import CANARY, HOSTILE, LEVEL, STEP

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
AVAILABLE = {r.name: r for r in ladder()}
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to run as another uid and to make mount namespaces)")

DRIVER = r"""
import ctypes, json, os, sys, yaml
import pyseccomp
args = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL = pyseccomp.resolve_syscall(pyseccomp.system_arch(), "keyctl")
ADD_KEY = pyseccomp.resolve_syscall(pyseccomp.system_arch(), "add_key")
canary = os.environ["OPENAI_API_KEY"].encode()
assert libc.syscall(KEYCTL, 1, b"envforge-test-session") >= 0, "cannot join a session keyring"
assert libc.syscall(ADD_KEY, b"user", b"envforge-canary", canary, len(canary), -3) >= 0, "cannot add a key"
level_path = os.path.join(args["env"], "levels", "level_01.yaml")
level = yaml.safe_load(open(level_path))
level["host_pid"] = os.getpid()  # this process is envforge here: its environ holds the canary
open(level_path, "w").write(yaml.safe_dump(level))
from pipeline.sandbox import Limits, Worker
worker = Worker(args["env"], Limits(call_seconds=60, cpu_seconds=60))
worker.call("reset", level="levels/level_01.yaml")
worker.call("step", action={"action": "go", "params": {}})
state = worker.call("observe", want_state=True)["state"]
worker.close()
print(json.dumps({"uid": os.getuid(), "confinement": worker.confinement, "found": state["found"],
                  "environs": state["environs"], "environment": state["environment"]}))
"""

# Run as root in a private mount namespace: make `paths` reachable by any uid, then exec argv.
VIEW = r"""
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
paths, argv = sys.argv[1].split("\n"), sys.argv[2:]
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
blocked = {}
for path in paths:
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        folder = "/" + "/".join(parts[:i])
        if not os.stat(folder).st_mode & 0o001:  # others cannot enter it
            blocked.setdefault(folder, []).append(path)
            break
for folder in sorted(blocked, key=len):
    fds = {p: os.open(p, os.O_PATH) for p in blocked[folder]}
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", folder], check=True)
    for path, fd in fds.items():
        os.makedirs(path, exist_ok=True) if os.path.isdir(f"/proc/self/fd/{fd}") else None
        # The kernel follows /proc/self/fd/N to the folder now hidden (mount(8) would resolve the name).
        assert libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, 4096 | 16384, None) == 0, path
os.execvp(argv[0], argv)
"""


def _needed_paths() -> list[str]:
    from pipeline.sandbox.confine import readable_paths

    return readable_paths() + [os.path.dirname(os.path.realpath(sys.executable))]


class Scene:
    """A /tmp folder for one run: the planted secrets, a folder outside the env, the env copy, and
    listeners (TCP on loopback, a UNIX socket file, an abstract UNIX socket) the env tries to reach."""

    def __init__(self, uid: int):
        self.dir = Path(tempfile.mkdtemp(prefix="envforge-ladder-"))
        os.chmod(self.dir, 0o755)
        self.planted = self.dir / "planted"
        self.outside = self.dir / "outside"
        for folder in (self.planted, self.outside):
            folder.mkdir()
        for name in (".env", "credentials"):
            (self.planted / name).write_text(f"OPENAI_API_KEY={CANARY}\n")
            os.chmod(self.planted / name, 0o600)
        self.tmp_target = f"/tmp/envforge-ladder-{uuid.uuid4().hex}.txt"
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.unix_path = str(self.dir / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        self.unix.listen(8)
        self.abstract_name = f"envforge-ladder-{uuid.uuid4().hex}"
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen(8)
        self.env = self.dir / "env"
        shutil.copytree(HOSTILE / "confinement_probe", self.env)
        level = yaml.safe_load((self.env / LEVEL).read_text())
        level.update(port=self.tcp.getsockname()[1], target=str(self.outside / "escaped.txt"),
                     tmp_target=self.tmp_target, unix_socket=self.unix_path, abstract_socket=self.abstract_name,
                     secret_files=[str(self.planted / ".env"), str(self.planted / "credentials")])
        (self.env / LEVEL).write_text(yaml.safe_dump(level))
        for path in [self.dir, *self.dir.rglob("*")]:
            os.chown(path, uid, uid)
        os.chmod(self.unix_path, 0o777)

    def connections(self) -> list[str]:
        got = []
        for name, listener in (("tcp", self.tcp), ("unix", self.unix), ("abstract", self.abstract)):
            listener.setblocking(False)
            try:
                listener.accept()[0].close()
                got.append(name)
            except BlockingIOError:
                pass
        return got

    def close(self) -> None:
        for listener in (self.tcp, self.unix, self.abstract):
            listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        Path(self.tmp_target).unlink(missing_ok=True)


def run_driver(scene: Scene, rung: str, uid: int) -> dict:
    """The driver's report; as `uid` (0: root itself)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": CANARY, "ENVFORGE_TEST_PASSWORD": CANARY,
           "HOME": str(scene.planted), "ENVFORGE_CONFINEMENT": rung, "TMPDIR": "/tmp"}
    argv = [sys.executable, "-c", DRIVER, json.dumps({"env": str(scene.env)})]
    if uid:
        argv = ["unshare", "--mount", sys.executable, "-c", VIEW, "\n".join(_needed_paths()),
                "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] + argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=scene.dir, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# What each attempt must end with, per rung: (attempt, regex of the result). Every one fails.
FAILED = r"^(PermissionError|FileNotFoundError|OSError|ConnectionRefusedError|BlockingIOError|RuntimeError|ProcessLookupError)"
ATTEMPTS = ("read_secret_0", "read_secret_1", "write_outside", "tcp_loopback", "udp_socket", "af_vsock", "af_packet",
            "unix_socket", "abstract_socket", "io_uring_setup", "parent_environ", "fork", "thread", "keyring",
            "ptrace_parent", "signal_parent")
RUNS = [(rung, uid) for rung in ("namespaces", "userns", "landlock") for uid in (0, NOBODY)
        if not (rung == "namespaces" and uid)]  # the root rung is root's alone


@ROOT_ONLY
@pytest.mark.parametrize("rung,uid", RUNS, ids=[f"{r}-{'root' if u == 0 else 'uid65534'}" for r, u in RUNS])
def test_every_rung_contains_the_hostile_probe(rung: str, uid: int):
    if not AVAILABLE[rung].available:
        pytest.skip(f"{rung} not available here: {AVAILABLE[rung].detail}")
    scene = Scene(uid)
    try:
        report = run_driver(scene, rung, uid)
        connections = scene.connections()
        outside = sorted(p.name for p in scene.outside.iterdir())
        tmp_written = Path(scene.tmp_target).exists()
    finally:
        scene.close()
    assert (report["uid"], report["confinement"]) == (uid, rung)
    found = report["found"]
    import re

    escaped = {k: found[k] for k in ATTEMPTS if not re.match(FAILED, found[k])}
    assert escaped == {}, f"escapes on {rung} as uid {uid}: {escaped}"
    assert connections == [], f"the env reached a host listener: {connections}"
    assert outside == [], "the env wrote into a host folder outside its own"
    assert not tmp_written, "the env wrote into the host's /tmp"
    if rung == "landlock":
        assert found["write_tmp"].startswith("PermissionError"), found["write_tmp"]
    else:  # a private /tmp
        assert found["write_tmp"].startswith("ok"), found["write_tmp"]
    assert CANARY not in json.dumps(report), "the canary reached the env"
    assert set(report["environment"]) <= {"PATH", "HOME", "TMPDIR", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
                                          "PYTHONUNBUFFERED", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                          "MKL_NUM_THREADS", "LANG", "LC_ALL", "TZ",
                                          "LC_CTYPE"}  # Python's own C-locale coercion (PEP 538), report["environment"]
    # Which mechanism stopped it: the seccomp filter for sockets, io_uring, keyring, ptrace, signals.
    for attempt in ("af_vsock", "af_packet", "io_uring_setup", "keyring", "ptrace_parent", "signal_parent"):
        assert "Operation not permitted" in found[attempt] or "EPERM" in found[attempt], (attempt, found[attempt])
    assert "Resource temporarily unavailable" in found["fork"], found["fork"]  # the filter, or RLIMIT_NPROC
