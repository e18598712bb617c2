"""Errors that end a command with a message for the user instead of a traceback.

UserError and LocatedError are defined on the floor (pipeline.located), so the lowest packages can
raise them; they are named here too, with the others, for the commands."""
from __future__ import annotations

import errno
import os
import sqlite3

from envforge.pipeline.located import LocatedError, UserError

__all__ = ["DiskFull", "InfrastructureError", "LocatedError", "OutputClosed", "Rejected", "UserError", "Unwritable",
           "not_a_folder", "write_fault"]

FULL = {errno.ENOSPC: "the disk full", errno.EDQUOT: "the disk quota used up",
        errno.EFBIG: "the file-size limit reached"}
UNWRITABLE = {errno.EROFS: "a read-only file system", errno.EACCES: "no permission to write there",
              errno.EPERM: "no permission to write there"}


def not_a_folder(path) -> str:
    """What is at `path` instead of the folder a command expected there, for its error's "found"
    part: "no such folder", "a file", "a symbolic link" (never followed) or "a special file"."""
    import os
    import stat

    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "no such folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a file"
    return "a folder" if stat.S_ISDIR(mode) else "a special file"


class InfrastructureError(Exception):
    """The machinery failed (a cluster node was lost, say), not an environment or the user's input.
    The CLI prints it and exits with status 1; the same command with the same output resumes."""


class Rejected(Exception):
    """An environment (or a theme) is unfit: why, in words a person can act on (what was
    expected, what was found, where), the stage that found it, and details for review.

    A verification stage raises it with the reason alone; whoever runs the stage names it.
    `cause`: what a caller may decide on (a typed value, e.g. pipeline.verify.causes), never
    the wording of `reason`.
    """

    def __init__(self, reason: str, stage: str = "", details: dict | None = None, cause: object = None):
        super().__init__(reason)
        self.reason, self.stage, self.details, self.cause = reason, stage, details or {}, cause

    def at(self, stage: str) -> "Rejected":
        """This rejection, named after `stage` when no stage named it yet."""
        if not self.stage:
            self.stage = stage
        return self


class DiskFull(UserError):
    """A write failed for want of space, quota or the file-size limit; what was written before is kept."""


class Unwritable(UserError):
    """A write failed because the place is read-only or not the user's to write."""


class OutputClosed(BaseException):
    """The reader of the command's output went away (`envforge generate | head`). Not an
    Exception: no stage's `except Exception` may take it for a bug of its own and record a theme
    as an error; it stops the command like Ctrl-C does, keeping what was written."""


def write_fault(exc: BaseException, path: object = None,
                kept: str = "what was written before is kept") -> UserError | None:
    """A failed write (an OSError, or SQLite's "disk full" and "read-only database") as the user's
    one line, `PATH: expected room to write it, found the disk full (...)`; None for any other
    exception. The one rule for these faults: records, the run database and the command line all
    ask it. `path`: where the write went, when the exception does not say; `kept`: what the user
    still has."""
    where = path if path is not None else getattr(exc, "filename", None)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL:
            return DiskFull(f"{where or 'the database'}: expected room to write it, found the disk full ({exc}); "
                            f"{kept} — free some space and run the command again")
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
            return Unwritable(f"{where or 'the database'}: expected a database envforge can write, found {exc}; "
                              f"choose a folder you can write (--out)")
        return None
    if not isinstance(exc, OSError) or isinstance(exc, BrokenPipeError):
        return None
    where = where or "the output"
    if exc.errno in FULL:
        return DiskFull(f"{where}: expected room to write it, found {FULL[exc.errno]} ({os.strerror(exc.errno)}); "
                        f"{kept} — free some space and run the command again")
    if exc.errno in UNWRITABLE:
        return Unwritable(f"{where}: expected a place envforge can write, found {UNWRITABLE[exc.errno]} "
                          f"({os.strerror(exc.errno)}); choose a folder you can write (--out)")
    return None
