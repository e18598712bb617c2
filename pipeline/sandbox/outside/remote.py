"""Sandbox workers on the nodes of a Ray cluster (`--executor ray`).

A `RayWorker` is a `Worker` whose process lives on some node of the cluster: the parent ships
the environment folder's files (regular files only, bounded; links and special files refused,
as everywhere on the host), a Ray actor on that node unpacks them and starts an ordinary
sandboxed `Worker` there — confined on the node's own rung of the ladder (capabilities.py), which
it reports back (`confinement` and `runs_as`, in every record) — and every call goes to that actor. A node with
no rung is refused, as a machine is (`Unconfined`); with the driver's --unconfined opt-in its
workers run and the node is named in a warning. The episode loops, agents, model calls and records stay in this
process: the keys are
here and never leave it, and one process writes every record, so `--resume` works as on one
machine. A node that dies takes its actors with it; a call on such a worker raises `NodeLost`,
an infrastructure fault that callers retry elsewhere, never a verdict on the environment.

Ray is an optional extra (`pip install 'envforge-rl[ray]'`); nothing here imports it until a
command asks for the Ray executor.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from envforge.pipeline import install_hint
from envforge.pipeline.errors import InfrastructureError, UserError
from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside.capabilities import NONE, Unconfined, opted_in, used
from envforge.pipeline.sandbox.outside.failures import SandboxFailure, WorkerStartFailed
from envforge.pipeline.sandbox.outside.folder import FolderCopy

ADDRESS_VARIABLE = "ENVFORGE_RAY_ADDRESS"


class NodeLost(InfrastructureError):
    """The node (or the Ray worker process) holding a sandbox worker is gone: retry elsewhere."""


def pack_folder(copy: FolderCopy) -> bytes:
    """The sandbox's copy of a folder (link-free, bounded: see pipeline.sandbox.outside.folder) as a tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(copy.path, arcname=".")
    return buffer.getvalue()


def unpack_folder(files: bytes, folder: str) -> None:
    """pack_folder's tar into `folder`: regular files and folders only, every name inside it. The
    same check on every Python (tarfile's "data" filter came with 3.11.4; Debian 12's is 3.11.2)."""
    with tarfile.open(fileobj=io.BytesIO(files)) as tar:
        members = tar.getmembers()
        for member in members:
            if not (member.isfile() or member.isdir()) or member.name.startswith("/") or ".." in Path(
                    member.name).parts:
                raise ValueError(f"expected regular files and folders inside the folder, found "
                                 f"{member.name!r} (tar type {member.type!r})")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(folder, members, filter="data")
        else:
            tar.extractall(folder, members)


def _actor_class():
    import ray

    # No CPU is reserved: like local workers, how many run at once is the command's --concurrency
    # (a reservation would let workers a command holds starve the ones it asks for next).
    @ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD")
    class SandboxActor:
        """Runs on a cluster node: holds one sandboxed Worker over an unpacked folder copy."""

        def __init__(self, name: str, files: bytes, limits: dict, skin: str | None, env_id: Any,
                     unconfined: bool = False):
            from envforge.pipeline.sandbox.outside.capabilities import Unconfined
            from envforge.pipeline.sandbox.outside.failures import WorkerStartFailed
            from envforge.pipeline.sandbox.outside.folder import private_dir
            from envforge.pipeline.sandbox.outside.process import Worker

            # Named after this Ray worker process: if it is killed before close(), the next
            # sandbox worker started on the node sweeps it (folder.sweep_stale).
            self.dir = private_dir()
            folder = os.path.join(self.dir, name)
            os.mkdir(folder)
            unpack_folder(files, folder)
            self.node = ray.get_runtime_context().get_node_id()
            self.worker, self.failure, self.refused, self.start_failed = None, None, None, None
            try:
                # The node's own ladder, with the driver's opt-in (never the node's environment's).
                self.worker = Worker(folder, SandboxLimits(**limits), env_id=env_id, skin=skin, unconfined=unconfined)
            except SandboxFailure as failure:
                self.failure = failure.to_dict()
            except Unconfined as refused:
                self.refused = str(refused)
            except WorkerStartFailed as failed:  # the node's machinery, not the environment
                self.start_failed = str(failed)

        def started(self) -> dict:
            if self.refused:
                return {"refused": self.refused, "node": self.node}
            if self.failure:
                return {"failure": self.failure, "node": self.node}
            if self.start_failed:
                return {"start_failed": self.start_failed, "node": self.node}
            from envforge.pipeline.sandbox.outside.capabilities import runs_as  # the node's uid, said there

            return {"info": self.worker.info, "node": self.node, "confinement": self.worker.confinement,
                    "runs_as": self.worker.runs_as, "ran_as": runs_as(self.worker.confinement)}

        def call(self, op: str, timeout: float | None, args: dict) -> dict:
            # Failures cross the cluster as plain data: exceptions with fields do not pickle.
            try:
                return {"result": self.worker.call(op, timeout=timeout, **args),
                        "cpu": self.worker.cpu_seconds_used}
            except SandboxFailure as failure:
                return {"failure": failure.to_dict(), "alive": self.worker.alive}

        def close(self) -> None:
            from envforge.pipeline.sandbox.outside.folder import remove_tree

            if self.worker is not None:
                self.worker.close()
            remove_tree(self.dir)

    return SandboxActor


_actor = None
_actor_lock = threading.Lock()
_unconfined_nodes: set[str] = set()


def _warn_unconfined(node: str) -> None:
    """With the opt-in, a node whose workers run with no confinement is named, once."""
    import sys

    if node not in _unconfined_nodes:
        _unconfined_nodes.add(node)
        print(f"envforge: warning: Ray node {node} runs environment code UNCONFINED (no rung of the "
              f"confinement ladder there; allowed by --unconfined)", file=sys.stderr)


def connect(address: str | None) -> dict:
    """Join the cluster at `address` (`auto`, `host:port`, `ray://…`), else $ENVFORGE_RAY_ADDRESS,
    else start a local one-machine cluster. Returns the cluster's resources."""
    address = address or os.environ.get(ADDRESS_VARIABLE) or None
    if address is None:
        # A cluster of this machine alone talks over loopback only (read by Ray at import).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise UserError(f"--executor ray: expected the Ray extra to be installed ({install_hint('ray')}), "
                        "found no module named 'ray'") from None
    if not ray.is_initialized():
        if address is None:
            _start_local_cluster(ray)
        else:
            _join(ray, address)
    return ray.cluster_resources()


def _join(ray, address: str) -> None:
    _reachable(address)
    try:
        # Nodes ship the environment folders themselves; the cluster needs envforge
        # installed on every node (same version), not this checkout.
        with _stderr_kept() as said:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, ignore_reinit_error=True)
    except Exception as exc:  # Ray's refusals take many types, a bare Exception among them
        # The cluster's refusal, which Ray's exception does not carry: "InvalidAuthToken: Authentication
        # token is missing or incorrect"
        refused = next((line[line.index("InvalidAuthToken"):].strip() for line in said.text.splitlines()
                        if "InvalidAuthToken" in line), "")
        found = f"{_first_line(exc)} (the cluster said {refused})" if refused else _first_line(exc)
        raise UserError(f"--executor ray: expected a Ray cluster at {address}, found: {found}"
                        f"{_token_hint(ray)}") from None


class _Kept:
    text = ""  # what was written to file descriptor 2 while it was kept, when the block failed


@contextlib.contextmanager
def _stderr_kept():
    """Ray's core (C++) writes its retries to file descriptor 2 itself, a line a second while it
    fails to connect (20 lines of 'Failed to get cluster ID from GCS server' for a missing token).
    They are kept aside while Ray connects: shown as they were if it connects, else left to the
    caller (`.text`), who makes its one line of them."""
    import tempfile

    kept = _Kept()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        failed = True
        try:
            yield kept
            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            aside.seek(0)
            text = aside.read(1 << 20)
            if failed:
                kept.text = text.decode(errors="replace")
            elif text:
                os.write(2, text)


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)  # Ray's AuthenticationError: without its help text
    return (str(text).strip().splitlines() or [type(exc).__name__])[0]


AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _token_hint(ray) -> str:
    """A cluster uses token authentication when its head was started with RAY_AUTH_MODE=token or
    with a token already in ~/.ray/auth_token (Ray 2.60: `ray start` turns it on only then), and Ray
    sends no token to an address given explicitly unless RAY_AUTH_MODE=token: a refused connection
    then looks like any other. Say what to set."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return ("; token authentication is on here (RAY_AUTH_MODE=token): check that this machine has the "
                "cluster's token (`ray get-auth-token` on the head node prints it) in ~/.ray/auth_token, a file "
                "named by RAY_AUTH_TOKEN_PATH (mode 0600) or RAY_AUTH_TOKEN, and that the cluster was started "
                "with token authentication (else unset RAY_AUTH_MODE)")
    return ("; if the cluster uses token authentication (its head started with RAY_AUTH_MODE=token), set "
            "RAY_AUTH_MODE=token and give this machine the cluster's token (`ray get-auth-token` on the head "
            "node prints it; put it in ~/.ray/auth_token or a file named by RAY_AUTH_TOKEN_PATH, mode 0600, or "
            "in RAY_AUTH_TOKEN)")


# What the processes of a local cluster (GCS, raylet, agents, workers) inherit from this process:
# what Ray and Python need to run, never a secret-looking variable (API keys stay in this process).
_CLUSTER_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
                  "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")
_CLUSTER_PREFIXES = ("LC_", "RAY_", "OMP_", "ENVFORGE_")
_environment_lock = threading.Lock()


def cluster_environment(environ: dict[str, str], token_path: str | None) -> dict[str, str]:
    """The environment of a local cluster's processes: an allowlist of `environ` without any
    secret-looking name, and (unless the user turned authentication off) token authentication
    with the token in `token_path`."""
    from envforge.pipeline.sandbox.limits import secret_looking

    env = {k: v for k, v in environ.items()
           if (k in _CLUSTER_NAMES or k.startswith(_CLUSTER_PREFIXES)) and not secret_looking(k)}
    if token_path is not None:  # Ray (2.59 on) turns token authentication on for a new local cluster itself
        env["RAY_AUTH_TOKEN_PATH"] = token_path
    return env


# The private folder of a local cluster: under /tmp itself, whatever TMPDIR says, since the UNIX
# socket paths Ray makes in it (…/ray/session_<date>_<pid>/sockets/plasma_store) must fit in 108 bytes.
LOCAL_CLUSTER_PREFIX = "envforge-ray-"
LOCAL_CLUSTER_WHERE = "/tmp" if os.path.isdir("/tmp") else None


def _start_local_cluster(ray) -> None:
    """A cluster of this machine alone, started with a scrubbed environment (see cluster_environment)
    and its own token and session files in a private folder (0700, named after this process; the
    token 0600), removed when this process ends, or, if it is killed, by the next local cluster's
    start. Ray's processes copy this process's environment when they start, so it is swapped for the
    scrubbed one while they do, then restored. A cluster that does not start is one line (Ray's
    first), and nothing of it is left."""
    import atexit
    import secrets

    from envforge.pipeline.sandbox.outside.folder import private_dir, remove_tree, sweep_stale

    sweep_stale(LOCAL_CLUSTER_PREFIX, LOCAL_CLUSTER_WHERE)
    private = private_dir(LOCAL_CLUSTER_PREFIX, LOCAL_CLUSTER_WHERE)
    token_path = None
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "disabled":
        token_path = os.path.join(private, "auth_token")
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))

    def remove() -> None:
        if ray.is_initialized():
            ray.shutdown()
        remove_tree(private)

    with _environment_lock:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(cluster_environment(saved, token_path))
        # RAY_AUTH_MODE is not set here: Ray reads it into its configuration at import, and only when it
        # turns authentication on itself does it read it again. It then says so (envforge's choice,
        # stated in the README): quiet.
        quiet = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level, quiet.level = quiet.level, logging.ERROR
        try:
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
                     ignore_reinit_error=True, _temp_dir=os.path.join(private, "ray"))
        except Exception as exc:  # Ray raises a bare Exception for a node that did not start in time
            try:
                ray.shutdown()  # the processes it did start
            finally:
                remove_tree(private)
            raise UserError(f"--executor ray: expected a new local Ray cluster, found: {_first_line(exc)}") from None
        finally:
            quiet.setLevel(level)
            mode = {k: os.environ[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH") if k in os.environ}
            os.environ.clear()
            os.environ.update(saved)
            if token_path is not None and ray.is_initialized():  # it talks to the cluster with its token
                os.environ.pop("RAY_AUTH_TOKEN", None)
                os.environ.update(mode)
    atexit.register(remove)


def _reachable(address: str | None) -> None:
    """A HOST:PORT that refuses connections is said at once; Ray itself would retry for minutes."""
    import socket

    host, sep, port = (address or "").rpartition(":")
    if not sep or not port.isdigit() or "://" in address or address == "auto":
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise UserError(f"--executor ray: expected a Ray cluster at {address}, found none there "
                        f"({exc.strerror or exc})") from None


class RayWorker:
    """A sandbox worker on some node of the cluster; the surface of `Worker`."""

    def __init__(self, env_dir: str | Path, limits: SandboxLimits | None = None, env_id: Any = None,
                 skin: str | None = None, folder: FolderCopy | None = None):
        """Environments only: a learned agent's worker asks this process for model calls in
        mid-call, so it stays here, beside the keys (see pipeline.sandbox.outside.executor)."""
        import ray

        global _actor
        with _actor_lock:
            _actor = _actor or _actor_class()
        self.env_dir = Path(env_dir).resolve()
        self.limits = limits or SandboxLimits()
        self.skin = skin
        self.failed = False
        self.cpu_seconds_used = 0.0
        self._closed = False
        self._ray = ray
        copy = (folder or FolderCopy(str(self.env_dir), self.limits.folder_mb, self.limits.folder_files)).acquire()
        try:
            self.dropped = copy.dropped  # what the copy left out, as a local worker reports it
            files = pack_folder(copy)
        finally:
            copy.release()
        unconfined = opted_in()  # the driver's opt-in, sent along: the node applies it to its workers
        self._handle = _actor.remote(self.env_dir.name, files, self.limits.to_dict(), skin, env_id, unconfined)
        started = self._get(self._handle.started.remote(), "start")  # the remote worker's start and opening
        self.node = started["node"]
        if "refused" in started:
            self.close()
            raise Unconfined(f"Ray node {self.node}: {started['refused']}")
        if "failure" in started:
            self.close()
            raise SandboxFailure(**started["failure"])
        if "start_failed" in started:
            self.close()
            raise WorkerStartFailed(f"Ray node {self.node}: {started['start_failed']}")
        self.info = started["info"]
        self.confinement, self.runs_as = str(started["confinement"]), str(started["runs_as"])
        used(self.confinement, str(started["ran_as"]))
        if self.confinement == NONE:
            _warn_unconfined(self.node)

    def _get(self, ref, op: str) -> Any:
        try:
            return self._ray.get(ref)
        except (self._ray.exceptions.RayActorError, self._ray.exceptions.WorkerCrashedError,
                self._ray.exceptions.ActorUnavailableError, self._ray.exceptions.ObjectLostError) as exc:
            self.failed = True
            self._closed = True
            raise NodeLost(f"the Ray node holding {self.env_dir.name} was lost during '{op}': "
                           f"{type(exc).__name__}") from None

    def call(self, op: str, timeout: float | None = None, on_request=None, **args: Any) -> Any:
        if on_request is not None:
            raise SandboxFailure("usage", f"'{op}' with requests to the parent runs on a local worker only", op=op)
        if self._closed:
            raise SandboxFailure("usage", f"worker is closed; cannot {op}", op=op)
        reply = self._get(self._handle.call.remote(op, timeout, args), op)
        if "failure" in reply:
            self.failed = True
            self._closed = not reply.get("alive", False)
            raise SandboxFailure(**reply["failure"])
        self.cpu_seconds_used = reply["cpu"]
        return reply["result"]

    @property
    def alive(self) -> bool:
        return not self._closed

    def close(self) -> None:
        if getattr(self, "_handle", None) is None:
            return
        handle, self._handle, self._closed = self._handle, None, True
        try:
            self._ray.get(handle.close.remote(), timeout=30)
        except Exception:  # the node may be gone already; nothing of ours is left there then
            pass
        try:
            self._ray.kill(handle, no_restart=True)
        except Exception:
            pass

    def __enter__(self) -> "RayWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def simulated_cluster(nodes: int = 1, cpus: int = 1) -> Iterator[Any]:
    """Ray nodes simulated on this machine, for the tests and benchmarks/ray_bench.py: a started
    `ray.cluster_utils.Cluster` (its `address` is what `--ray-address` takes) of a head and
    `nodes - 1` more, of `cpus` CPUs each, over loopback only, its session files in a private folder
    of this process (as a local cluster's), removed with it. Not Ray's default /tmp/ray, shared by
    every user of the machine: once one user has run Ray there, another cannot write the address
    file Ray's test cluster writes there, and a normal user's cluster never started."""
    from envforge.pipeline.sandbox.outside.folder import private_dir, remove_tree, sweep_stale

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when Ray is imported
    from ray.cluster_utils import Cluster

    sweep_stale(LOCAL_CLUSTER_PREFIX, LOCAL_CLUSTER_WHERE)
    private = private_dir(LOCAL_CLUSTER_PREFIX, LOCAL_CLUSTER_WHERE)
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = private  # where the cluster writes its address file
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False,
                                                                "temp_dir": os.path.join(private, "ray")})
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        try:
            if cluster is not None:
                cluster.shutdown()
        finally:
            if saved is None:
                os.environ.pop("RAY_TMPDIR", None)
            else:
                os.environ["RAY_TMPDIR"] = saved
            remove_tree(private)
