"""Errors that end a command with a message for the user instead of a traceback."""
from __future__ import annotations

from dsl_schema.problems import Problem


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


class UserError(Exception):
    """Bad input from the user (missing file, malformed YAML, bad flag value).

    The message must say what was expected, what was found, and where.
    The CLI prints it and exits with status 2.
    """


class LocatedError(UserError):
    """A file that is not what it should be: the one located error of envforge. It carries the
    `Problem` (file, line when known, expected, found), so `envforge check` can report it as a
    finding and every other command as its one-line error, `file:line: expected …, found …`."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))

    @classmethod
    def at(cls, file: str, expected: str, found: str, line: int | None = None) -> "LocatedError":
        return cls(Problem(file, "", expected, found, line=line))


class InfrastructureError(Exception):
    """The machinery failed (a cluster node was lost, say), not an environment or the user's input.
    The CLI prints it and exits with status 1; the same command with the same output resumes."""


class Rejected(Exception):
    """An environment (or a theme) is unfit: why, in words a person can act on (what was
    expected, what was found, where), the stage that found it, and details for review.

    A verification stage raises it with the reason alone; whoever runs the stage names it.
    """

    def __init__(self, reason: str, stage: str = "", details: dict | None = None):
        super().__init__(reason)
        self.reason, self.stage, self.details = reason, stage, details or {}

    def at(self, stage: str) -> "Rejected":
        """This rejection, named after `stage` when no stage named it yet."""
        if not self.stage:
            self.stage = stage
        return self
