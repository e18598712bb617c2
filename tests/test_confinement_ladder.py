"""The confinement ladder (issue 21): every rung contains the same hostile environment, as root and
as a normal user; with no rung, nothing runs unless opted in, and then records say so. Root in a
container (issue 34): on whichever rung the container leaves it, environment code runs as a uid of
its own and cannot read root's files, or nothing runs; records and doctor name that uid.

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
from cli_kit import envforge
from sandbox_kit import CANARY, HOSTILE, LEVEL

from envforge.pipeline.sandbox.outside.capabilities import ladder

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
AVAILABLE = {r.name: r for r in ladder()}
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root (to run as another uid and to make mount namespaces)"
)
ROOT_IN_A_CONTAINER = pytest.mark.skipif(
    os.geteuid() != 0, reason="simulates root in a container: needs root (to plant a root-owned 0600 file and to "
                              "take capabilities from root); as a normal user the env runs as that user"
)

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
from envforge.pipeline.sandbox import SandboxLimits, Worker
worker = Worker(args["env"], SandboxLimits(call_seconds=60, cpu_seconds=60))
worker.call("reset", level="levels/level_01.yaml")
worker.call("step", action={"action": "go", "params": {}})
state = worker.call("observe", want_state=True)["state"]
# The process running env code, seen from here: below `unshare` on the namespaced rungs.
children = open(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children").read().split()
inner = int(children[0]) if children else worker.proc.pid
status = dict(line.split(":", 1) for line in open(f"/proc/{inner}/status").read().splitlines())
kept = {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")}
worker.close()
print(json.dumps({"uid": os.getuid(), "confinement": worker.confinement, "found": state["found"], "status": kept,
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
    from envforge.pipeline.sandbox.inside.confine import readable_paths

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


def run_as(scene: Scene, rung: str, uid: int, argv: list[str]) -> subprocess.CompletedProcess:
    """`argv` as `uid` (0: root itself), with the canary in its environment and `rung` picked."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": CANARY, "ENVFORGE_TEST_PASSWORD": CANARY,
           "HOME": str(scene.planted), "ENVFORGE_CONFINEMENT": rung, "TMPDIR": "/tmp"}
    if uid:
        argv = ["unshare", "--mount", sys.executable, "-c", VIEW, "\n".join(_needed_paths()),
                "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] + argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=scene.dir, env=env)


def run_driver(scene: Scene, rung: str, uid: int) -> dict:
    """The driver's report."""
    done = run_as(scene, rung, uid, [sys.executable, "-c", DRIVER, json.dumps({"env": str(scene.env)})])
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# What each attempt must end with, per rung: (attempt, regex of the result). Every one fails.
FAILED = (r"^(PermissionError|FileNotFoundError|OSError|ConnectionRefusedError|BlockingIOError|RuntimeError"
          r"|ProcessLookupError)")
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
    # No capabilities, no_new_privs, a seccomp filter (mode 2), on every rung.
    status = report["status"]
    assert (status["CapEff"], status["CapPrm"], status["NoNewPrivs"], status["Seccomp"]) == (
        "0" * 16, "0" * 16, "1", "2"), status
    if rung == "userns" or (rung == "landlock" and uid == 0):  # a uid 0 (in its namespace, or root itself)
        assert status["CapBnd"] == "0" * 16, status  # that gets nothing back through an exec


@ROOT_ONLY
@pytest.mark.parametrize("rung", ["userns", "landlock"])
def test_evaluate_as_a_normal_user_runs_the_probe_confined_and_records_the_rung(rung: str):
    if not AVAILABLE[rung].available:
        pytest.skip(f"{rung} not available here: {AVAILABLE[rung].detail}")
    scene = Scene(NOBODY)
    try:
        out = scene.dir / "out"
        done = run_as(scene, rung, NOBODY, [sys.executable, "-m", "envforge", "evaluate", str(scene.env),
                                            "--agent", "random", "--runs", "1", "--out", str(out)])
        rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()] if (
            out / "episodes.jsonl").exists() else []
        written = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
        connections = scene.connections()
        outside = sorted(p.name for p in scene.outside.iterdir())
        tmp_written = Path(scene.tmp_target).exists()
    finally:
        scene.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(rows) == 1 and rows[0]["steps"] > 0 and rows[0]["stop_reason"] != "env_error", rows
    assert rows[0]["confinement"] == rung
    assert rows[0]["runs_as"] == f"uid {NOBODY} (yours)" + ("; uid 0 in its user namespace" if rung == "userns" else "")
    assert (connections, outside, tmp_written) == ([], [], False)
    assert CANARY not in written + done.stdout + done.stderr


# -- root in a container: environment code never runs as uid 0 (issue 34) --------------------------
# Three containers, simulated around the driver as Docker would start envforge: the landlock rung
# forced; a seccomp profile like Docker's default (unshare, setns and clone with a namespace flag
# refused: the namespaced rungs fail and envforge picks landlock itself); Docker's default
# capabilities (no CAP_SYS_ADMIN: the root rung fails and envforge picks userns). uid 0 owns
# /etc/shadow and every 0600 file of root, and reading what one owns takes no capability: the env
# reads them unless it runs as another uid.
DOCKER_SECCOMP = r"""
import errno, os, sys
import pyseccomp
f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
for name in ("unshare", "setns"):
    f.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: Docker allows clone only without them
for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
    f.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
f.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
f.load()
os.execvp(sys.argv[1], sys.argv[1:])
"""
NO_SYS_ADMIN = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]
CONTAINERS = {  # name -> (wrapper, rung forced, the rung envforge must end on)
    "landlock-forced": ([], "landlock", "landlock"),
    "docker-seccomp": ([sys.executable, "-c", DOCKER_SECCOMP], "", "landlock"),
    "no-cap-sys-admin": (NO_SYS_ADMIN, "", "userns"),
}
READ_DRIVER = r"""
import json, sys
from envforge.pipeline.sandbox import SandboxLimits, Worker
worker = Worker(sys.argv[1], SandboxLimits(call_seconds=60, cpu_seconds=60))
worker.call("reset", level="levels/level_01.yaml")
worker.call("step", action={"action": "go", "params": {}})
state = worker.call("observe", want_state=True)["state"]
children = open(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children").read().split()
inner = int(children[0]) if children else worker.proc.pid
status = dict(line.split(":", 1) for line in open(f"/proc/{inner}/status").read().splitlines())
seen = {k: status[k].split() for k in ("Uid", "Gid", "Groups", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
worker.close()
print(json.dumps({"confinement": worker.confinement, "runs_as": worker.runs_as, "read": state["read"],
                  "ids": state["ids"], "host_view": seen}))
"""


class RootFiles:
    """A root-owned 0600 file beside the Python the worker runs (the virtual environment: on every rung
    a path the worker may read), /etc/shadow, and the env that tries to read them."""

    def __init__(self, uid: int):
        self.dir = self.planted = Path(tempfile.mkdtemp(prefix="envforge-rootfiles-"))
        os.chmod(self.dir, 0o755)
        self.secret = Path(sys.prefix) / f"envforge-test-secret-{uuid.uuid4().hex}"
        self.secret.write_text(f"{CANARY}\n")
        os.chown(self.secret, 0, 0)
        os.chmod(self.secret, 0o600)
        self.shadow = Path("/etc/shadow")
        self.shadow_line = self.shadow.read_text().splitlines()[0] if self.shadow.exists() else CANARY
        self.env = self.dir / "env"
        shutil.copytree(HOSTILE / "read_root_files", self.env)
        (self.env / LEVEL).write_text(yaml.safe_dump({"n": 0, "files": [str(self.secret), str(self.shadow)]}))
        for path in [self.dir, *self.dir.rglob("*")]:
            os.chown(path, uid, uid)

    def close(self) -> None:
        self.secret.unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)


CONTAINER_RUNS = [(name, uid) for name in CONTAINERS for uid in (0, NOBODY)]


@ROOT_IN_A_CONTAINER
@pytest.mark.parametrize("container,uid", CONTAINER_RUNS,
                         ids=[f"{c}-{'root' if u == 0 else 'uid65534'}" for c, u in CONTAINER_RUNS])
def test_in_a_container_env_code_cannot_read_roots_files(container: str, uid: int):
    wrapper, forced, rung = CONTAINERS[container]
    if uid and container == "no-cap-sys-admin":
        pytest.skip("a normal user has no CAP_SYS_ADMIN to take away: test_every_rung_contains_the_hostile_probe"
                    "[userns-uid65534] is this run")
    if not AVAILABLE[rung].available:
        pytest.skip(f"{rung} not available here: {AVAILABLE[rung].detail}")
    scene = RootFiles(uid)
    try:
        done = run_as(scene, forced, uid, wrapper + [sys.executable, "-c", READ_DRIVER, str(scene.env)])
    finally:
        scene.close()
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert CANARY not in said and scene.shadow_line not in said, "the env read a file of root's"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["confinement"] == rung, report
    assert {path: result.split(":")[0] for path, result in report["read"].items()} == {
        str(scene.secret): "PermissionError", str(scene.shadow): "PermissionError"}, report["read"]
    ids, host = report["ids"], report["host_view"]
    # As the env sees itself: not uid 0, no groups, no capabilities.
    assert ids["uid"] == ids["euid"] != 0 and ids["gid"] == ids["egid"] != 0, ids
    assert ids["groups"] == [] and ids["capabilities"] == [0, 0, 0], ids
    # As the host sees it: root's worker is a uid of its own (200000+) that owns no file; a normal user's, that user.
    host_uid = int(host["Uid"][0])
    assert set(host["Uid"]) == set(host["Gid"]) == {str(host_uid)} and host["Groups"] == [], host
    assert (host["CapEff"], host["CapPrm"], host["CapBnd"], host["NoNewPrivs"]) == (
        ["0" * 16], ["0" * 16], ["0" * 16] if uid == 0 else host["CapBnd"], ["1"]), host
    if uid == 0:
        assert 200_000 <= host_uid < 700_000, host
        assert report["runs_as"].startswith(f"uid {host_uid} (its own), owning no file, no groups"), report
        assert ids["uid"] == (1 if rung == "userns" else host_uid), ids
    else:
        assert host_uid == uid and report["runs_as"] == f"uid {uid} (yours)", report


@ROOT_IN_A_CONTAINER
def test_root_that_cannot_change_uid_is_refused_in_one_line_and_runs_no_env_code(tmp_path):
    """A container that took CAP_SETUID and CAP_SETGID from root (and CAP_SYS_ADMIN, as Docker does):
    no rung can run environment code as anyone but uid 0, so none runs."""
    env, marker = _marked_env(tmp_path)
    strip = ["setpriv", "--bounding-set=-sys_admin,-setuid,-setgid", "--inh-caps=-sys_admin,-setuid,-setgid"]
    done = subprocess.run(strip + [sys.executable, "-m", "envforge", "check", str(env)], capture_output=True,
                          text=True, timeout=900, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k not in ("ENVFORGE_CONFINEMENT",
                                                                               "ENVFORGE_UNCONFINED")})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "envforge check: error: no sandbox can be made here, so no environment code runs"), done.stderr
    for rung in ("userns", "landlock"):
        assert (f"{rung}: root without CAP_SETUID, CAP_SETGID cannot run environment code as a uid of its own, and "
                f"envforge runs none as uid 0") in lines[0], lines[0]
    assert not marker.exists(), "environment code ran"


@ROOT_IN_A_CONTAINER
def test_root_of_a_user_namespace_without_ids_to_spare_is_refused_in_one_line(tmp_path):
    """A rootless container's root (here: `unshare --user --map-root-user`, which maps uid 0 alone) has
    its namespace's capabilities but no uid to give a worker: nothing runs, rather than env code as root."""
    env, marker = _marked_env(tmp_path)
    done = subprocess.run(["unshare", "--user", "--map-root-user", sys.executable, "-m", "envforge", "check",
                           str(env)], capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k not in ("ENVFORGE_CONFINEMENT",
                                                                               "ENVFORGE_UNCONFINED")})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "envforge check: error: no sandbox can be made here, so no environment code runs"), done.stderr
    for rung in ("namespaces", "userns", "landlock"):
        assert f"{rung}: no uid of its own for a worker: this user namespace maps none of 200000-699999" in lines[0]
    assert not marker.exists(), "environment code ran"


@ROOT_IN_A_CONTAINER
@pytest.mark.parametrize("container", ["docker-seccomp", "no-cap-sys-admin"])
def test_in_a_container_doctor_and_records_name_the_uid_env_code_runs_as(container: str, tmp_path):
    wrapper, _, rung = CONTAINERS[container]
    if not AVAILABLE[rung].available:
        pytest.skip(f"{rung} not available here: {AVAILABLE[rung].detail}")
    from envforge.pipeline.testing.tiny_env import write_env

    env = write_env(tmp_path / "corridor")
    base = {k: v for k, v in os.environ.items() if k not in ("ENVFORGE_CONFINEMENT", "ENVFORGE_UNCONFINED")}

    def envforge_in_container(*argv: str) -> subprocess.CompletedProcess:
        done = subprocess.run(wrapper + [sys.executable, "-m", "envforge", *argv], capture_output=True, text=True,
                              timeout=900, cwd=ROOT, env=base)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    own = "its own uid per worker (200000+), owning no file, no groups, no capabilities" + (
        "; uid 1 in its user namespace" if rung == "userns" else "")
    doctor = envforge_in_container("doctor").stdout
    assert f"confinement: {rung}, environment code as {own}" in doctor, doctor
    assert f"uid: enforced (environment code runs as {own})" in doctor, doctor
    envforge_in_container("evaluate", str(env), "--agent", "random", "--runs", "1", "--max-levels", "1",
                          "--out", str(tmp_path / "out"))
    rows = [json.loads(line) for line in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert rows and {r["confinement"] for r in rows} == {rung}, rows
    for row in rows:
        uid = int(row["runs_as"].split()[1])
        assert 200_000 <= uid < 700_000 and row["runs_as"].startswith(f"uid {uid} (its own), owning no file"), row
    envforge_in_container("verify", str(env), "--write")
    verification = json.loads((env / "verification.json").read_text())
    manifest = json.loads((env / "manifest.json").read_text())
    assert (verification["confinement"], verification["runs_as"]) == (rung, own), verification
    assert (manifest["confinement"], manifest["runs_as"], manifest["verification"]["runs_as"]) == (rung, own, own)


def test_check_says_which_confinement_the_env_ran_under_and_as_which_uid(tmp_path):
    from envforge.pipeline.sandbox.outside.capabilities import capabilities, runs_as
    from envforge.pipeline.testing.tiny_env import write_env

    env = write_env(tmp_path / "corridor")
    done = envforge("check", str(env), cwd=ROOT)
    last = done.stdout.strip().splitlines()[-1]
    mode = capabilities()["mode"]
    assert last.startswith("ok: ") and f", sandbox: {mode}, env code as {runs_as(mode)} (" in last, (
        done.stdout + done.stderr)
    done = _no_rung("-m", "envforge", "check", str(env), "--unconfined")
    assert done.returncode == 0 and f", sandbox: none, env code as uid {os.geteuid()} (" in (
        done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


# -- no rung: refuse, or run with the opt-in and say so ---------------------------------------
# Makes this machine one with no rung, as Docker's default profile or a hardened kernel does:
# a seccomp filter on the driver and everything it starts refuses unshare (so neither namespaced
# rung starts) and answers landlock_create_ruleset with ENOSYS (no Landlock). Then runs argv.
NO_RUNG = r"""
import errno, os, sys
import pyseccomp
f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
f.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare")
f.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
f.load()
os.execv(sys.argv[1], sys.argv[1:])
"""
MARKER_ENV = '''
import builtins
_open = getattr(builtins, "op" + "en")
_open({marker!r}, "w").write("environment code ran")
'''


def _no_rung(*argv: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("ENVFORGE_CONFINEMENT", "ENVFORGE_UNCONFINED")}
    return subprocess.run([sys.executable, "-c", NO_RUNG, sys.executable, *argv], capture_output=True, text=True,
                          timeout=900, cwd=cwd, env={**base, **(env or {})})


def _marked_env(tmp_path: Path) -> tuple[Path, Path]:
    from envforge.pipeline.testing.tiny_env import write_env

    marker = tmp_path / "marker.txt"
    env = write_env(tmp_path / "marked")
    (env / "env_main.py").write_text(MARKER_ENV.format(marker=str(marker)) + (env / "env_main.py").read_text())
    return env, marker


@pytest.mark.parametrize("command", ["check", "evaluate", "verify", "play"])
def test_with_no_rung_commands_refuse_in_one_line_and_run_no_env_code(command, tmp_path):
    env, marker = _marked_env(tmp_path)
    args = {"check": [str(env)], "verify": [str(env)], "play": [str(env), "--level", "levels/level_01.yaml"],
            "evaluate": [str(env), "--agent", "random", "--out", str(tmp_path / "out")]}[command]
    done = _no_rung("-m", "envforge", command, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"envforge {command}: error: no sandbox can be made here, so no environment code runs"
    ), lines
    for named in ("namespaces: ", "userns: unshare refused", "landlock: no Landlock", "--unconfined"):
        assert named in lines[0], (named, lines[0])
    assert not marker.exists(), "environment code ran"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("episodes.jsonl"))


def test_with_no_rung_the_python_api_refuses_too(tmp_path):
    env, marker = _marked_env(tmp_path)
    code = (
        "import sys\nfrom envforge.pipeline.sandbox import Worker\nfrom envforge.pipeline.errors import UserError\n"
        f"try:\n    Worker({str(env)!r})\nexcept UserError as e:\n    print(type(e).__name__, e)\n    sys.exit(3)\n"
    )
    done = _no_rung("-c", code)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("Unconfined no sandbox can be made here"), done.stdout
    assert not marker.exists(), "environment code ran"


def test_with_no_rung_and_the_opt_in_commands_run_warn_and_records_say_none(tmp_path):
    from envforge.pipeline.testing.tiny_env import write_env

    env = write_env(tmp_path / "corridor")
    done = _no_rung("-m", "envforge", "verify", str(env), "--write", "--unconfined")
    assert "warning: running environment code UNCONFINED" in done.stderr, done.stderr
    verification = json.loads((env / "verification.json").read_text())
    manifest = json.loads((env / "manifest.json").read_text())
    assert verification["confinement"] == "none"
    assert manifest["confinement"] == "none" and manifest["verification"]["confinement"] == "none"
    out = tmp_path / "out"
    done = _no_rung("-m", "envforge", "evaluate", str(env), "--agent", "random", "--runs", "1", "--out", str(out),
                    env={"ENVFORGE_UNCONFINED": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: running environment code UNCONFINED" in done.stderr, done.stderr
    episodes = [json.loads(line) for line in next(out.rglob("episodes.jsonl")).read_text().splitlines()]
    assert episodes and {e["confinement"] for e in episodes} == {"none"}


def test_confined_records_name_their_rung_and_the_uid_env_code_ran_as(tmp_path):
    from envforge.pipeline.sandbox.outside.capabilities import capabilities, runs_as
    from envforge.pipeline.testing.tiny_env import write_env

    env = write_env(tmp_path / "corridor")
    done = subprocess.run(
        [sys.executable, "-m", "envforge", "verify", str(env), "--write"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    mode = capabilities()["mode"]
    verification = json.loads((env / "verification.json").read_text())
    assert (verification["confinement"], verification["runs_as"]) == (mode, runs_as(mode)), done.stderr
    manifest = json.loads((env / "manifest.json").read_text())
    assert (manifest["confinement"], manifest["runs_as"]) == (mode, runs_as(mode))


@ROOT_ONLY
def test_unconfined_workers_still_get_no_parent_environment_nor_its_proc_environ():
    """With the opt-in and no rung the env reads what envforge's uid can (the probe is not blind),
    yet not envforge's environment variables or /proc/PID/environ."""
    scene = Scene(0)
    try:
        argv = [sys.executable, "-c", DRIVER, json.dumps({"env": str(scene.env)})]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": CANARY, "HOME": str(scene.planted),
               "ENVFORGE_UNCONFINED": "1", "TMPDIR": "/tmp"}
        done = subprocess.run([sys.executable, "-c", NO_RUNG] + argv, capture_output=True, text=True, timeout=600,
                              cwd=scene.dir, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        scene.close()
    assert report["confinement"] == "none"
    assert report["found"]["read_secret_0"].startswith("ok"), report["found"]  # unconfined indeed
    assert report["found"]["parent_environ"].startswith("PermissionError"), report["found"]["parent_environ"]
    assert CANARY not in report["environs"] and CANARY not in json.dumps(report["environment"])


# -- a Ray node with no rung ------------------------------------------------------------------
@pytest.mark.slow
def test_a_ray_node_with_no_rung_is_refused_and_with_the_opt_in_named_and_recorded(tmp_path):
    """The node (a one-node cluster started under the no-rung filter, so its raylet and workers have
    no rung) refuses the driver's work; with --unconfined it runs it, the driver names the node in a
    warning and the episode records say "none". The driver itself has a rung."""
    pytest.importorskip("ray", reason="the Ray extra is not installed (pip install 'envforge-rl[ray]')")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_cli = str(Path(sys.executable).parent / "ray")
    env = {**{k: v for k, v in os.environ.items() if k not in ("ENVFORGE_CONFINEMENT", "ENVFORGE_UNCONFINED")},
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled"}  # the node and the driver alone, on this machine; auth is not the subject
    # --block keeps the node's processes under this one process group, which the test ends itself.
    # A short --temp-dir: the node's UNIX socket paths must fit in 108 bytes.
    ray_tmp = tempfile.mkdtemp(prefix="efray-")
    head = subprocess.Popen([sys.executable, "-c", NO_RUNG, ray_cli, "start", "--head", "--block", "--num-cpus", "1",
                             f"--port={port}", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
                             f"--temp-dir={ray_tmp}", "--disable-usage-stats"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        import time

        deadline = time.monotonic() + 600  # how long a busy machine may take to start a node, not a bound tested
        while head.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        assert head.poll() is None, "the Ray node did not start"
        from envforge.pipeline.testing.tiny_env import write_env

        corridor = write_env(tmp_path / "corridor")
        argv = [sys.executable, "-m", "envforge", "evaluate", str(corridor), "--agent", "random", "--runs", "1",
                "--max-levels", "1", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"]

        def evaluate(*extra: str) -> subprocess.CompletedProcess:
            return subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)

        refused = evaluate("--out", str(tmp_path / "refused"))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "error: Ray node " in refused.stderr and "no sandbox can be made here" in refused.stderr, refused.stderr
        assert not (tmp_path / "refused" / "episodes.jsonl").exists() or not (
            tmp_path / "refused" / "episodes.jsonl").read_text().strip()
        allowed = evaluate("--out", str(tmp_path / "allowed"), "--unconfined")
        assert allowed.returncode == 0, allowed.stdout + allowed.stderr
        assert "warning: Ray node " in allowed.stderr and "runs environment code UNCONFINED" in allowed.stderr
        rows = [json.loads(line) for line in (tmp_path / "allowed" / "episodes.jsonl").read_text().splitlines()]
        assert rows and {r["confinement"] for r in rows} == {"none"}
    finally:
        os.killpg(head.pid, 9)
        head.wait()
        shutil.rmtree(ray_tmp, ignore_errors=True)
