"""The one writer and reader of every file envforge writes.

Writing: every file goes to disk whole or not at all — a temporary file in the same folder,
flushed and fsynced, then renamed over the target — so a run killed at any instant, or a full
disk, leaves the previous version. JSONL logs (episodes, trajectories, call journals) grow by
appending one line at a time. A last line cut short (a kill, a full disk) is set aside before
anything is appended (`repair_tail`: moved to FILE.torn, with a warning), so a new record never
lands on the end of a partial one; a reader skips it and says so.

Versioning: every JSON object envforge writes (a whole .json file, or each line of a .jsonl
file) starts with

    "format": "envforge.<kind>/<major>", "envforge": "<version that wrote it>"

The kinds and their models are declared once, in KINDS (the models, with their major
versions, in pipeline/kinds.py). `write(path, obj)` writes a model; `read(path, Model)` returns
one, built and checked field by field (`lines(path, Model)` for a JSONL file). A reader names the
kind it expects; a record of another kind, or of a major version this envforge does not know,
is refused with a RecordError saying which envforge wrote it (the CLI prints it on one line and
exits 2). A record with no `format` is read as major version 1: envforge wrote such files
before records were versioned, and folders in the AutoEnv format carry none.

SQLite databases (the run database, the response cache) carry their schema version in
PRAGMA user_version; `open_sqlite` refuses a database from a newer envforge.

An output folder (of generate, evaluate, learn) is used by one process at a time: `locked` holds
an flock on FOLDER/.envforge.lock for the whole run, and a second process is refused in one line.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import sqlite3
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, TypeVar

from envforge.pipeline import __version__, kinds, safe_io
from envforge.pipeline.errors import DiskFull, write_fault
from envforge.pipeline.kinds import Record, RecordError
from envforge.pipeline.located import LocatedError, UserError

R = TypeVar("R", bound=Record)

FORMAT, WRITER = "format", "envforge"
LOCK_FILE = ".envforge.lock"
# kind -> its model (pipeline/kinds.py), which carries the current major version. Bump the major
# when a reader of the old one would misread.
KINDS: dict[str, type[Record]] = {model.KIND: model for model in kinds.MODELS}
SQLITE_SCHEMAS = {"run_db": 3, "response_cache": 1}  # database -> PRAGMA user_version
_FORMAT = re.compile(r"envforge\.([a-z_]+)/(\d+)")


# -- versioning -------------------------------------------------------------------------------

def format_of(kind: str) -> str:
    return f"envforge.{kind}/{KINDS[kind].MAJOR}"


def stamp(kind: str, data: dict) -> dict:
    """`data` as a record of `kind`: its format and this envforge's version first."""
    rest = {k: v for k, v in data.items() if k not in (FORMAT, WRITER)}
    return {FORMAT: format_of(kind), WRITER: __version__, **rest}


def check(data: Any, kind: str, where: str | Path) -> dict:
    """`data` (parsed JSON) as a record of `kind`, without the format fields; refuses another kind
    or an unknown major version."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected a JSON object ({format_of(kind)}), found {type(data).__name__}")
    found = data.get(FORMAT)
    writer = data.get(WRITER)
    by = (
        f"written by envforge {writer}"
        if isinstance(writer, str) and len(writer) < 40
        else "written by an unknown writer"
    )
    if found is not None:
        match = _FORMAT.fullmatch(found) if isinstance(found, str) else None
        if match is None:
            raise RecordError(f"{where}: expected format {format_of(kind)}, found {str(found)[:80]!r} ({by})")
        if match.group(1) != kind:
            raise RecordError(f"{where}: expected a record of format {format_of(kind)}, found {found} ({by})")
        if int(match.group(2)) != KINDS[kind].MAJOR:
            raise RecordError(f"{where}: format {found} ({by}) is not one this envforge {__version__} reads "
                              f"(it reads {format_of(kind)}); use the envforge that wrote it")
    return {k: v for k, v in data.items() if k not in (FORMAT, WRITER)}


def loads(text: str, kind: str, where: str | Path) -> dict:
    """One JSON record from text: a located RecordError when it is not JSON or not `kind`."""
    try:  # the one bounded JSON reader: a record may come with a folder from anywhere
        data = safe_io.parse_json(text, str(where), finite=False)
    except LocatedError as e:
        raise RecordError(f"{where}: expected JSON ({format_of(kind)}), found invalid JSON: {e.problem.found}"
                          + (f" (line {e.problem.line})" if e.problem.line else "")) from None
    return check(data, kind, where)


def dumps(kind: str, data: dict, indent: int | None = 2) -> str:
    return json.dumps(stamp(kind, data), indent=indent, default=str, allow_nan=False) + ("\n" if indent else "")


# -- reading ----------------------------------------------------------------------------------

def read_json(path: str | Path, kind: str, missing: Any = None) -> Any:
    """The record at `path` (format fields removed), or `missing` when there is no file."""
    path = Path(path)
    data = _read(path, kind)
    if data is None:
        return missing
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(f"{path}: expected a readable {format_of(kind)} file, found: {e}") from None
    return loads(text, kind, path)


def read(path: str | Path, model: type[R], missing: Any = None) -> R | Any:
    """The record at `path` as `model`, or `missing` when there is no file; a RecordError naming
    the file (and the field) when it is another kind, a newer major or does not fit the model."""
    data = read_json(path, model.KIND, None)
    return missing if data is None else model.from_dict(data, str(path))


def lines(path: str | Path, model: type[R], repair: bool = False, unfit: str = "refuse") -> Iterator[tuple[int, R]]:
    """(line number, record as `model`) of each line of a JSONL file (see read_jsonl). A line that
    does not fit the model is refused (RecordError), or with `unfit="skip"` left out (a reader
    showing what it can: review); a line of another kind or a newer major is refused either way."""
    for number, data in read_jsonl(path, model.KIND, repair):
        try:
            yield number, model.from_dict(data, f"{path}:{number}")
        except RecordError:
            if unfit != "skip":
                raise


def _read(path: Path, kind: str) -> bytes | None:
    """The bytes of the regular file at `path`, None when there is none. A record may sit in a
    folder someone else made (a shared archive of runs), so the file is not followed if it is a
    link (it may name a key file) and a special file is refused (a FIFO would block for good,
    /dev/zero never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        found = "a symbolic link (never followed)" if e.errno == errno.ELOOP else e.strerror or type(e).__name__
        raise RecordError(f"{path}: expected a regular {format_of(kind)} file, found {found}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordError(f"{path}: expected a regular {format_of(kind)} file, found a special file")
        return f.read()


def read_jsonl(path: str | Path, kind: str, repair: bool = False) -> Iterator[tuple[int, dict]]:
    """(line number, record) of each line; a record of another kind or version is refused. A line
    that is not JSON is skipped with a warning; with `repair` (a reader that appends next), a last
    line cut short is first set aside (repair_tail)."""
    path = Path(path)
    if repair:
        repair_tail(path)
    data = _read(path, kind)
    if data is None:
        return
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = safe_io.parse_json(line, f"{path}:{number}", finite=False)
        except LocatedError:
            cut = number == len(lines)  # no newline after it: cut short by a kill or a full disk
            warn(f"{path}:{number}: expected a JSON record ({format_of(kind)}), found "
                 + ("a line cut short" if cut else "a line that is not JSON") + "; left out")
            continue
        yield number, check(data, kind, f"{path}:{number}")


def warn(message: str) -> None:
    """A warning on stderr, where the CLI and a notebook show it."""
    print(f"envforge: warning: {message}", file=sys.stderr, flush=True)


# -- writing ----------------------------------------------------------------------------------

def write(path: str | Path, record: Record, indent: int | None = 2) -> Path:
    """`record` to `path`, atomically, stamped with its kind and this envforge's version."""
    return write_json(path, record.KIND, record.to_dict(), indent)


def append(path: str | Path, record: Record, durable: bool = False) -> None:
    """`record` appended as one line of a JSONL file."""
    append_jsonl(path, record.KIND, record.to_dict(), durable)


def write_json(path: str | Path, kind: str, data: dict, indent: int | None = 2) -> Path:
    return write_text(path, dumps(kind, data, indent))


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Whole or not at all: temp file in the same folder, fsync, rename over `path`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        _raise_if_full(e, path)
        raise
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        _discard(tmp)
        _raise_if_full(e, path)
        raise
    return path


def write_figure(path: str | Path, figure, dpi: int = 110) -> Path:
    """A matplotlib figure, in the format the file name says (.png), written atomically."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format=Path(path).suffix.lstrip(".") or "png", dpi=dpi)
    return write_bytes(path, buffer.getvalue())


def append_jsonl(path: str | Path, kind: str, data: dict, durable: bool = False) -> None:
    """Append one record as a line; with `durable`, fsynced before returning."""
    append_text(path, json.dumps(stamp(kind, data), default=str, allow_nan=False) + "\n", durable)


def append_text(path: str | Path, text: str, durable: bool = False) -> None:
    """Append to a log file. A failed append is cut back off, so the file never ends in part of
    what envforge meant to write; a last line another process left cut short is set aside first."""
    line = text.encode("utf-8")
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_log(path, os.O_APPEND)
    except OSError as e:
        _raise_if_full(e, path)
        raise
    try:
        _repair_tail(fd, path)
        size = os.fstat(fd).st_size
        try:
            _write_all(fd, line)
            if durable:
                os.fsync(fd)
        except OSError as e:
            os.ftruncate(fd, size)
            _raise_if_full(e, path)
            raise
    finally:
        os.close(fd)


TORN_SUFFIX = ".torn"
_TAIL_CHUNK = 1 << 16


def repair_tail(path: str | Path) -> None:
    """Set aside the last line of the log at `path` if it was cut short (see _repair_tail)."""
    path = Path(path)
    try:
        fd = _open_log(path, os.O_APPEND, create=False)
    except FileNotFoundError:
        return
    try:
        _repair_tail(fd, path)
    finally:
        os.close(fd)


def _repair_tail(fd: int, path: Path) -> None:
    """A log that does not end in a newline ends in a line cut short (a kill, a full disk). A cut
    JSON line is moved to FILE.torn (appended there, never lost) and the log truncated to the
    line before it, with a warning; a last line that is whole JSON only gets its newline."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = size
    while start > 0:
        chunk_start = max(0, start - _TAIL_CHUNK)
        chunk = os.pread(fd, start - chunk_start, chunk_start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            start = chunk_start + newline + 1
            break
        start = chunk_start
    tail = os.pread(fd, size - start, start)
    try:
        json.loads(tail)
        whole = path.suffix == ".jsonl"
    except ValueError:
        whole = False
    if whole:
        os.write(fd, b"\n")
        return
    side = path.with_name(path.name + TORN_SUFFIX)
    kept = _open_log(side, os.O_APPEND)
    try:
        _write_all(kept, tail + b"\n")
    finally:
        os.close(kept)
    os.ftruncate(fd, start)
    warn(f"{path}: its last line was cut short (a killed run or a full disk); its {len(tail)} byte(s) were moved "
         f"to {side.name} and the file goes on from the line before")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _open_log(path: Path, flags: int, create: bool = True) -> int:
    """A log file opened for writing, never through a link (in a folder someone else made, a
    trajectory linked to ~/.bashrc would be truncated or appended to) nor a special file."""
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | flags, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO):
            found = "a symbolic link (never followed)" if e.errno == errno.ELOOP else "a special file"
            raise RecordError(f"{path}: expected a regular file to write, found {found}") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RecordError(f"{path}: expected a regular file to write, found a special file")
    os.set_blocking(fd, True)
    return fd


class JsonlLog:
    """An open JSONL file written line by line (a trajectory): each line flushed as it is written."""

    def __init__(self, path: Path, kind: str):
        self.path, self.kind = path, kind  # each line a record of `kind` (or of one of its shapes)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = os.fdopen(_open_log(path, os.O_TRUNC), "w", encoding="utf-8")
        except OSError as e:
            _raise_if_full(e, path)
            raise

    def write(self, record: Record) -> None:
        if record.KIND != self.kind:
            raise ValueError(f"{self.path}: expected a record of kind {self.kind}, found {record.KIND}")
        try:
            self._file.write(json.dumps(stamp(self.kind, record.to_dict()), default=str, allow_nan=False) + "\n")
            self._file.flush()
        except OSError as e:
            _raise_if_full(e, self.path)
            raise

    def close(self) -> None:
        try:
            self._file.close()
        except OSError as e:
            _raise_if_full(e, self.path)
            raise


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _raise_if_full(e: BaseException, path: Path) -> None:
    fault = write_fault(e, path, kept="the previous version is kept")
    if isinstance(fault, DiskFull):
        raise fault from None


# -- one process per output folder ------------------------------------------------------------

@contextlib.contextmanager
def locked(folder: str | Path, command: str):
    """Hold `folder` for this process (made if missing) while the block runs; another process
    holding it is refused with a UserError naming it. The lock goes with the process, however it ends."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            raise
        raise UserError(f"--out {folder}: expected no other envforge run using it, found {holder}; wait for it to "
                        f"finish, or choose another --out") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"envforge {command} (process {os.getpid()})".encode(), 0)
        yield
    finally:
        os.close(fd)


# -- SQLite -----------------------------------------------------------------------------------

def open_sqlite(path: str | Path, schema: str, database: str, **connect) -> sqlite3.Connection:
    """A connection to `path` whose schema version (PRAGMA user_version) this envforge knows;
    a new or unversioned (older) database gets the current version."""
    current = SQLITE_SCHEMAS[database]
    conn = sqlite3.connect(path, **connect)
    try:
        found = conn.execute("PRAGMA user_version").fetchone()[0]
        if found > current:
            raise RecordError(f"{path}: its schema version is {found}, written by a newer envforge; this envforge "
                              f"{__version__} reads version {current} of the {database.replace('_', ' ')}; "
                              f"use the envforge that wrote it, or another folder")
        conn.executescript(schema)
        if found < current:
            conn.execute(f"PRAGMA user_version = {int(current)}")
    except sqlite3.OperationalError as e:
        conn.close()
        raise (write_fault(e, path) or e) from None
    except BaseException:
        conn.close()
        raise
    return conn


class Guarded:
    """A SQLite connection whose writes that fail for want of room or permission raise the user's
    one line (errors.write_fault: DiskFull, Unwritable), not sqlite3.OperationalError."""

    def __init__(self, conn: sqlite3.Connection, path: str | Path):
        self._conn, self.path = conn, path

    def execute(self, sql: str, parameters=()):
        try:
            return self._conn.execute(sql, parameters)
        except sqlite3.OperationalError as e:
            raise (write_fault(e, self.path) or e) from None

    def __getattr__(self, name: str):
        return getattr(self._conn, name)
