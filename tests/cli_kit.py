"""Running the `envforge` command as a user does, and the suite's expensive artifacts made once.

`envforge(*argv, cwd=...)` runs the command as a person without model keys does, with its
response cache and .env beside the test's files, and (by default) asserts no traceback reached the
user: in this test process through the command line's entry (`pipeline.cli.main`, what the
installed `envforge` script calls), or, where a test needs a real process, as the installed
command in a subprocess. The session fixtures in conftest.py (`generate_demo`, `learn_demo`) run the README's
offline demos once per test session into a cache shared by the xdist workers (see `shared_artifact`).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"
ENVFORGE = str(Path(sys.executable).parent / "envforge")
SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
           "OPENAI_BASE_URL", "ENVFORGE_MODEL")


def offline_environ(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without model keys or base URLs; the response cache and .env in `home`."""
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env.update(ENVFORGE_CACHE=str(Path(home) / "cache.sqlite"), ENVFORGE_DOTENV=str(Path(home) / ".env"),
               COLUMNS="400")
    env.update(extra)
    return env


def envforge(*argv: str, cwd: Path | None = None, home: Path | None = None, env: dict | None = None,
             timeout: float = 600, traceback_ok: bool = False, process: bool = False,
             **popen) -> subprocess.CompletedProcess:
    """`envforge ARGV...` in `cwd` as a person without any model key runs it. `home` (default: cwd)
    holds its cache and .env; `env` replaces the environment altogether. Without `cwd` it runs in an
    empty folder made for it and removed after (for a command given only absolute paths).

    It runs in this process (`in_process`, with exactly `env` as its environment when given): a
    command's imports cost 0.2-0.5 CPU-seconds a fresh process, and the suite runs hundreds of
    commands; the environment code still runs in the command's sandbox workers, processes of their
    own. `process=True` runs the installed command in a subprocess instead: for a test that needs a
    process of its own (it sends a signal, kills it, feeds its stdin, or runs it while this process
    is busy); so does any subprocess keyword (`input`, `stdin`, ...), and `timeout` is kept only there.
    ENVFORGE_TEST_PROCESSES=1 runs every command in a subprocess (to check that a test passes both ways)."""
    if cwd is None:
        with tempfile.TemporaryDirectory(prefix="envforge-cwd-") as empty:
            return envforge(*argv, cwd=Path(empty), home=home, env=env, timeout=timeout, traceback_ok=traceback_ok,
                            process=process, **popen)
    argv = tuple(map(str, argv))
    environ = env if env is not None else offline_environ(Path(home or cwd))
    # --executor ray connects the process running the command to a Ray cluster (ray.init), for good: a
    # command that does runs in a process of its own, or every later test would talk to that cluster.
    ray = "--executor=ray" in argv or any(a == "--executor" and b == "ray" for a, b in zip(argv, argv[1:]))
    if process or ray or popen or os.environ.get("ENVFORGE_TEST_PROCESSES") == "1":
        done = subprocess.run([ENVFORGE, *argv], cwd=cwd, env=environ, capture_output=True, text=True,
                              timeout=timeout, **popen)
    else:
        done = in_process(argv, cwd=Path(cwd), environ=environ)
    if not traceback_ok:
        assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    return done


# What a command may change in the process that runs it, put back after each in-process run.
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


def in_process(argv: tuple[str, ...], cwd: Path, environ: dict[str, str]) -> subprocess.CompletedProcess:
    """`pipeline.cli.main(argv)` in this process as the installed script runs it in its own: in `cwd`,
    with exactly `environ` as its environment, its stdout and stderr captured; an exception that
    escapes is printed as Python prints it (a "Traceback") and exits 1; `SystemExit` (argparse's
    usage errors, --help, --version) gives its exit status. Afterwards the working directory, the
    environment, the signal handlers, the streams and the root logger's handlers are as they were.
    The root logger has no handler during the call, as in a fresh process (pytest adds its own):
    a warning a command logs is printed on its stderr."""
    from envforge.pipeline import cli

    saved_environ, saved_cwd = dict(os.environ), os.getcwd()
    saved_handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    saved_streams = sys.stdout, sys.stderr
    root = logging.getLogger()
    saved_log_handlers = root.handlers[:]
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        root.handlers[:] = []
        sys.stdout, sys.stderr = out, err
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=err)
        except Exception:
            traceback.print_exc(file=err)
            code = 1
    finally:
        sys.stdout, sys.stderr = saved_streams
        root.handlers[:] = saved_log_handlers
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        for sig, handler in saved_handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    return subprocess.CompletedProcess([ENVFORGE, *argv], code, out.getvalue(), err.getvalue())


def require_extra(module: str, extra: str) -> None:
    """Skip the calling test module when `module` (of envforge's `extra`) is not installed. It is
    looked up, not imported: every test process imports every test module to collect it, `-m "not slow"`
    or not, and importing openenv (Gradio) or inspect_ai there cost seconds of CPU a process. The tests
    import it where they use it; one that is installed but fails to import fails there, not skips."""
    if importlib.util.find_spec(module) is None:
        import pytest

        pytest.skip(f"the {extra} extra is not installed (pip install 'envforge[{extra}]')", allow_module_level=True)


# -- artifacts made once per test session ---------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """A finished command: what it printed, its exit code, and the folder it wrote (shared: copy it
    with `copy_to` before writing into it)."""
    returncode: int
    stdout: str
    stderr: str
    out: Path

    def copy_to(self, where: Path) -> Path:
        """A private copy of the output folder at `where`, for a test that writes into it; without
        the files SQLite keeps beside a database while a test of another process reads it (-shm,
        -wal: they come and go as it opens and closes it; what a run wrote is in the database)."""
        return Path(shutil.copytree(self.out, where, symlinks=True, ignore=shutil.ignore_patterns("*-shm", "*-wal")))


def tree_digests(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under `folder`, but the output lock (pipeline/records.py's
    LOCK_FILE: a command that only reads a run folder still takes its lock, an flock on that file) and
    what SQLite keeps beside a database while a connection is open: the shared-memory index (-shm) and
    an empty write-ahead log (-wal). A test of another process reading the run's database has them
    there; a write shows in a log that is not empty, or in the database once the last connection closes."""
    from envforge.pipeline.records import LOCK_FILE

    digests = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.name == LOCK_FILE or path.name.endswith("-shm"):
            continue
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # a -wal or -shm its connection removed as it closed
            continue
        if not (path.name.endswith("-wal") and not data):
            digests[str(path.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return digests


def shared_artifact(cache: Path, name: str, argv: list[str], cwd: Path = ROOT, timeout: float = 900,
                    copy_of: Path | None = None) -> Run:
    """`envforge ARGV... --out <cache>/<name>/out` run once for all test processes of a session;
    with `copy_of` (an environment folder), `envforge ARGV... <cache>/<name>/out` on a copy of it
    there (`verify`, which writes its records into the environment's folder).

    `cache` is a folder every xdist worker of the session sees (conftest.py's `artifact_cache`). The
    first process to ask takes an exclusive lock on <name>.lock and runs the command; the others wait
    on the lock, then read what it recorded. A finished run leaves run.json (exit code and output)
    and a digest of each file it wrote, so a test that wrote into the shared folder is caught at the end
    of the session (conftest.py), not by a later test's odd failure.
    """
    folder = cache / name
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = folder / "run.json"
        if not record.exists():
            if folder.exists():
                shutil.rmtree(folder)  # a run killed part way
            folder.mkdir()
            if copy_of is not None:
                shutil.copytree(copy_of, folder / "out", ignore=shutil.ignore_patterns("__pycache__", "_generated"))
            target = [folder / "out"] if copy_of is not None else ["--out", folder / "out"]
            done = envforge(*argv, *target, cwd=cwd, home=folder, timeout=timeout, traceback_ok=True)
            digests = tree_digests(folder / "out") if (folder / "out").is_dir() else {}
            record.write_text(json.dumps({"returncode": done.returncode, "stdout": done.stdout,
                                          "stderr": done.stderr, "files": digests}))
        saved = json.loads(record.read_text())
    return Run(saved["returncode"], saved["stdout"], saved["stderr"], folder / "out")


def changed_files(run: Run) -> list[str]:
    """Files of the shared folder that differ from what the command wrote (added, changed or gone)."""
    saved = json.loads((run.out.parent / "run.json").read_text())["files"]
    now = tree_digests(run.out) if run.out.is_dir() else {}
    return sorted(name for name in saved.keys() | now.keys() if saved.get(name) != now.get(name))
