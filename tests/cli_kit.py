"""Running the `envforge` command as a user does, and the suite's expensive artifacts made once.

`envforge(*argv, cwd=...)` runs the installed command in a subprocess, without model keys, with
its response cache and .env beside the test's files, and (by default) asserts no traceback reached
the user. The session fixtures in conftest.py (`generate_demo`, `learn_demo`) run the README's
offline demos once per test session into a cache shared by the xdist workers (see `shared_artifact`).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
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


def envforge(*argv: str, cwd: Path, home: Path | None = None, env: dict | None = None, timeout: float = 600,
             traceback_ok: bool = False, **popen) -> subprocess.CompletedProcess:
    """`envforge ARGV...` in `cwd` as a person without any model key runs it. `home` (default: cwd)
    holds its cache and .env; `env` replaces the environment altogether."""
    environ = env if env is not None else offline_environ(Path(home or cwd))
    done = subprocess.run([ENVFORGE, *map(str, argv)], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=timeout, **popen)
    if not traceback_ok:
        assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    return done


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
        """A private copy of the output folder at `where`, for a test that writes into it."""
        return Path(shutil.copytree(self.out, where, symlinks=True))


def tree_digests(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under `folder`, but the output lock (pipeline/records.py's
    LOCK_FILE: a command that only reads a run folder still takes its lock, an flock on that file)."""
    from pipeline.records import LOCK_FILE

    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink() and path.name != LOCK_FILE}


def shared_artifact(cache: Path, name: str, argv: list[str], cwd: Path = ROOT, timeout: float = 900) -> Run:
    """`envforge ARGV... --out <cache>/<name>/out` run once for all test processes of a session.

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
            done = envforge(*argv, "--out", folder / "out", cwd=cwd, home=folder, timeout=timeout, traceback_ok=True)
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
