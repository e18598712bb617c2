"""The sandbox's copy of an environment folder, made by the host, and the removal of any folder.

The copy is made by root from a folder a model or a stranger wrote, so it follows nothing: a
symbolic link, a special file (FIFO, device, socket), a hard link whose other names lie outside the
folder, or a file its owner could not read is left out and named in `dropped`; the total size and
file count are capped while copying, and so is the depth; an entry whose name breaks `name_problem`
(a control character such as a line break, or longer than a file system allows) is left out too.
`write_problem` states the same limits for a file about to be written (the coding agent's
workspace applies them, so it never makes a folder the sandbox would refuse). In namespaces mode one copy is shared,
read-only, by the
workers of a pool (each sees it through an overlay with a private writable layer: see confine.py).

`remove_tree` deletes whatever a worker left, at any depth and with any permission, and never raises.
"""
from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
import threading
from pathlib import Path

from envforge.pipeline.sandbox.outside.failures import SandboxFailure

DIR_PREFIX = "envforge-sbx-"
log = logging.getLogger("envforge.sandbox")
_said: set[tuple[str, str, str]] = set()  # what was left out, said once per process
SKIPPED_DIRS = {"__pycache__"}
MAX_DEPTH = 32
SKIPPED_SUFFIXES = (".pyc",)
MAX_NAME_BYTES = 255  # one file or folder name, in UTF-8 (NAME_MAX of Linux file systems)
_CHUNK = 1 << 20
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def private_dir(prefix: str = DIR_PREFIX, where: str | None = None) -> str:
    """A fresh 0700 folder named after this process, so a later process can sweep it (sweep_stale)."""
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where)


def sweep_stale(prefix: str = DIR_PREFIX, where: str | None = None) -> None:
    """Remove the private_dir folders of envforge processes that are gone (killed, or ended before
    removing theirs): a folder's name holds its process's pid. Never raises: a folder it cannot
    remove stays for a later sweep."""
    try:
        stale = list(Path(where or tempfile.gettempdir()).glob(f"{prefix}*-*"))
    except OSError:
        return
    for path in stale:
        pid = path.name[len(prefix):].split("-")[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            remove_tree(str(path))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class FolderCopy:
    """A bounded, link-free copy of `source` at `self.path`, shared by its holders (refcounted)."""

    def __init__(self, source: str, max_mb: int, max_files: int):
        self.source = source
        self.home = private_dir()
        self.path = os.path.join(self.home, "env")
        self.dropped: list[tuple[str, str]] = []  # (path in the folder, what it is), left out
        self._holders = 0
        self._lock = threading.Lock()
        try:
            _Copier(max_mb * 1024 * 1024, max_files, self.dropped).copy(source, self.path)
        except SandboxFailure:
            remove_tree(self.home)
            raise
        except OSError as e:
            remove_tree(self.home)
            raise SandboxFailure("load", f"cannot copy {source}: {e.strerror or e}", op="load") from None
        for path, what in self.dropped:
            if (source, path, what) not in _said:
                _said.add((source, path, what))
                log.warning("warning: %s: %s; the sandbox's copy leaves it out", os.path.join(source, path), what)

    def acquire(self) -> "FolderCopy":
        with self._lock:
            self._holders += 1
        return self

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders <= 0
        if last:
            remove_tree(self.home)


class _Copier:
    def __init__(self, max_bytes: int, max_files: int, dropped: list[tuple[str, str]]):
        self.bytes_left = max_bytes
        self.max_bytes = max_bytes
        self.files_left = max_files
        self.max_files = max_files
        self.dropped = dropped
        self.owner = 0
        # (dev, ino) of a hard-linked file -> [(copied name, its link count)]
        self.linked: dict[tuple[int, int], list[tuple[str, int]]] = {}

    def copy(self, source: str, target: str) -> None:
        """Depth first, holding open only the folders from the top down to the one being copied
        (at most MAX_DEPTH + 1 descriptors, whatever the number of sub-folders); every one is
        closed however the copy ends."""
        path: list[int] = []  # descriptors of the folders from `source` down to the current one
        try:
            path.append(os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))  # the folder the user named
            self.owner = os.fstat(path[0]).st_uid
            _mkdir(target)
            todo = [("", target, 0, self._copy_dir(path[0], "", target, 0))]
            while todo:
                rel, out, depth, subfolders = todo[-1]
                if not subfolders:
                    todo.pop()
                    os.close(path.pop())
                    continue
                name = subfolders.pop()
                path.append(os.open(name, _OPEN_DIR, dir_fd=path[-1]))
                inner = f"{rel}{name}/"
                todo.append((inner, os.path.join(out, name), depth + 1,
                             self._copy_dir(path[-1], inner, os.path.join(out, name), depth + 1)))
        finally:
            for fd in path:
                os.close(fd)
        self._drop_outside_links(target)

    def _copy_dir(self, fd: int, rel: str, out: str, depth: int) -> list[str]:
        """Copy the files of the folder `fd` and make its sub-folders; their names, last first."""
        with os.scandir(fd) as entries:
            names = sorted(e.name for e in entries)
        subfolders = []
        for name in names:
            path = f"{rel}{name}"
            problem = name_problem(name)
            if problem:
                self.dropped.append((shown(path), problem))
                continue
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if name in SKIPPED_DIRS:
                    continue
                self._count(path)
                if depth >= MAX_DEPTH:
                    raise SandboxFailure("load", f"expected folders at most {MAX_DEPTH} deep in an environment "
                                                 f"folder, found deeper (at {path})", op="load")
                _mkdir(os.path.join(out, name))
                subfolders.append(name)
            elif stat.S_ISLNK(st.st_mode):
                self.dropped.append((path, f"a symbolic link (to {_link_target(fd, name)!r})"))
            elif not stat.S_ISREG(st.st_mode):
                self.dropped.append((path, f"a {_kind(st.st_mode)}"))
            elif name.endswith(SKIPPED_SUFFIXES):
                continue
            elif st.st_uid != self.owner and not st.st_mode & stat.S_IROTH:
                self.dropped.append((path, f"a file of uid {st.st_uid} that the folder's owner "
                                           f"(uid {self.owner}) cannot read"))
            else:
                self._copy_file(fd, name, path, os.path.join(out, name), st)
        return subfolders[::-1]

    def _copy_file(self, fd: int, name: str, path: str, out: str, st: os.stat_result) -> None:
        self._count(path)
        src = os.open(name, _OPEN_FILE, dir_fd=fd)
        try:
            opened = os.fstat(src)
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(opened.st_mode):
                self.dropped.append((path, "a file that changed while it was copied"))
                return
            dst = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                while chunk := os.read(src, _CHUNK):
                    self.bytes_left -= len(chunk)
                    if self.bytes_left < 0:
                        raise SandboxFailure("load", f"expected an environment folder of at most "
                                                     f"{self.max_bytes // (1024 * 1024)} MB, found more "
                                                     f"(at {path})", op="load")
                    os.write(dst, chunk)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        # Any worker uid may change it through its own overlay layer: only root can enter the
        # 0700 folder holding the copy, and no worker writes to the copy itself.
        os.chmod(out, 0o777 if opened.st_mode & 0o100 else 0o666)
        if opened.st_nlink > 1:
            self.linked.setdefault((opened.st_dev, opened.st_ino), []).append((path, opened.st_nlink))

    def _drop_outside_links(self, target: str) -> None:
        """A hard-linked file is kept only if all its names are inside the folder."""
        for names in self.linked.values():
            nlink = names[0][1]
            if len(names) < nlink:
                for path, _ in names:
                    os.unlink(os.path.join(target, path))
                    self.dropped.append((path, f"a hard link to a file with {nlink - len(names)} "
                                               "name(s) outside the folder"))

    def _count(self, path: str) -> None:
        self.files_left -= 1
        if self.files_left < 0:
            raise SandboxFailure("load", f"expected an environment folder of at most {self.max_files} files "
                                         f"and folders, found more (at {path})", op="load")


def name_problem(name: str) -> str:
    """Why `name` cannot be a file or folder of an environment folder, or "" when it can: the one
    rule of names the sandbox's copy and the coding agent's workspace share. A control character
    (a line break, NUL, an escape) would forge a line of its own wherever the name is printed."""
    if name in ("", ".", "..") or "/" in name:
        return f"expected a file or folder name, found {shown(name)!r}"
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_NAME_BYTES:
        return f"a name of {size} bytes (at most {MAX_NAME_BYTES})"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return f"a name with the unprintable character {bad!r}"
    return ""


def shown(text: str, limit: int = 120) -> str:
    """`text` with every unprintable character escaped and cut to `limit` characters (said)."""
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return escaped + (f"...({len(text)} characters)" if len(text) > limit else "")


def write_problem(root: str, parts: tuple[str, ...], size: int, max_mb: int, max_files: int) -> str:
    """Why writing a file of `size` bytes at `root`/`parts` would leave a folder the sandbox's copy
    refuses or cuts (see `_Copier`), or "" when it would not: each name by `name_problem`, the
    depth by MAX_DEPTH, the files and folders by `max_files`, the bytes by `max_mb` — counted as
    the copy counts them. The folder is read without following links."""
    for name in parts:
        problem = name_problem(name)
        if problem:
            return problem
    if len(parts) - 1 > MAX_DEPTH:
        return f"a file {len(parts) - 1} folders deep (at most {MAX_DEPTH})"
    entries, total, old = 0, 0, 0
    target = os.path.join(root, *parts)
    todo = [(root, 0)]
    while todo:
        folder, depth = todo.pop()
        with os.scandir(folder) as it:
            for entry in it:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) and entry.name not in SKIPPED_DIRS:
                    entries += 1
                    if depth < MAX_DEPTH:
                        todo.append((entry.path, depth + 1))
                elif stat.S_ISREG(st.st_mode) and not entry.name.endswith(SKIPPED_SUFFIXES):
                    entries += 1
                    total += st.st_size
                    if entry.path == target:
                        old = st.st_size
    new = sum(not os.path.lexists(os.path.join(root, *parts[:i + 1])) for i in range(len(parts)))
    if entries + new > max_files:
        return (f"the folder would hold {entries + new} files and folders; the sandbox takes at most "
                f"{max_files}")
    if total - old + size > max_mb * 1024 * 1024:
        return (f"the folder would hold {total - old + size} bytes; the sandbox takes at most {max_mb} MB")
    return ""


def _mkdir(path: str) -> None:
    os.mkdir(path, 0o700)
    os.chmod(path, 0o777)  # see _copy_file


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _link_target(fd: int, name: str) -> str:
    try:
        return os.readlink(name, dir_fd=fd)[:200]
    except OSError:
        return "?"


def signature(source: str) -> tuple:
    """What identifies a folder's content cheaply: each entry's path, type, size and mtime, read
    without following links and no deeper than a copy would go."""
    entries, todo = [], [(source, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            with os.scandir(folder) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in found:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name in SKIPPED_DIRS:
                continue
            entries.append((entry.path, stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino))
            if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                todo.append((entry.path, depth + 1))
    return (source, tuple(entries))


def remove_tree(path: str) -> bool:
    """Delete `path` and everything under it; True when it is gone. Never raises.

    Iterative, one directory open at a time (a 3,000-deep chain has paths too long to name and
    would overflow a recursive walk); each directory is made writable first, whatever mode the
    worker left on it. Another process sweeping the same folder at once is no error."""
    for _ in range(3):
        try:
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                _empty_dir(path)
                os.rmdir(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            continue
        if not os.path.lexists(path):
            return True
    return not os.path.lexists(path)


def _empty_dir(path: str) -> None:
    fd = os.open(path, _OPEN_DIR)
    names: list[str] = []  # the path from `path` down to the directory `fd` holds
    try:
        while True:
            _chmod_fd(fd)
            child = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        child = entry.name
                        break
                    _unlink(entry.name, fd)
            if child is not None:
                try:
                    inner = _open_child(child, fd)
                except FileNotFoundError:
                    continue
                os.close(fd)
                fd = inner
                names.append(child)
                continue
            if not names:
                return
            parent = os.open("..", _OPEN_DIR & ~os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(names.pop(), dir_fd=fd)
            except FileNotFoundError:
                pass
    finally:
        os.close(fd)


def _open_child(name: str, dir_fd: int) -> int:
    """The folder `name` in `dir_fd`, opened for reading even when it has no permission left: the
    owner gives them back first. Only root reads a folder of mode 0, so the folder is pinned (O_PATH
    needs no permission on it, O_NOFOLLOW refuses a link put in its place) and its mode set through
    the pin: nothing but that folder is ever changed."""
    try:
        return os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except PermissionError:
        pinned = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{pinned}", 0o700)
            return os.open(f"/proc/self/fd/{pinned}", _OPEN_DIR & ~os.O_NOFOLLOW)
        finally:
            os.close(pinned)


def _chmod_fd(fd: int) -> None:
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as e:
        if e.errno == errno.EISDIR:
            return
        raise
