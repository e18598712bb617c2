"""Errors that end a command with a message for the user instead of a traceback.

UserError and LocatedError are defined on the floor (pipeline.located), so the lowest packages can
raise them; they are named here too, with the others, for the commands."""
from __future__ import annotations

from envforge.pipeline.located import LocatedError, UserError

__all__ = ["InfrastructureError", "LocatedError", "Rejected", "UserError", "not_a_folder"]


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
