"""Checked values of the library's options: every number or name a user gives, from the command
line or from Python, is checked once, here.

Each check takes the text of a flag or a Python value and returns the value, or raises
`BadValue` saying what was expected and what was found. The command layer turns that into
the parser's one line naming the flag (`envforge evaluate: error: argument --max-steps: expected a
whole number >= 1, found '-5'`, pipeline/commands/_flags.py); the Python API into a `UserError`
naming the keyword (pipeline/api/options.py).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable


class BadValue(ValueError):
    """A value that is not what its option expects; the message says what was expected and found."""


def whole(minimum: int = 1, maximum: int | None = None) -> Callable[[Any], int]:
    """A whole number in [minimum, maximum]."""
    def parse(text: Any) -> int:
        if isinstance(text, int) and not isinstance(text, bool):
            value = text
        else:
            try:
                value = int(text, 10) if isinstance(text, str) else None
            except ValueError:
                value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise BadValue(f"expected {_range('a whole number', minimum, maximum)}, found {text!r}")
        return value
    parse.__name__ = "whole number"
    return parse


def number(minimum: float = 0.0, maximum: float | None = None, *, above: bool = False) -> Callable[[Any], float]:
    """A finite number >= minimum (> minimum with `above`), <= maximum."""
    def parse(text: Any) -> float:
        try:
            value = math.nan if isinstance(text, bool) else float(text)
        except (TypeError, ValueError):
            value = math.nan
        low_ok = value > minimum if above else value >= minimum
        if not math.isfinite(value) or not low_ok or (maximum is not None and value > maximum):
            what = _range("a number", minimum, maximum, strict=above)
            raise BadValue(f"expected {what}, found {text!r}")
        return value
    parse.__name__ = "number"
    return parse


def _range(kind: str, minimum: float, maximum: float | None, strict: bool = False) -> str:
    low = f"> {minimum:g}" if strict else f">= {minimum:g}"
    return f"{kind} {low}" + (f" and <= {maximum:g}" if maximum is not None else "")


# The common cases, named for what they count.
COUNT = whole(1)          # runs, levels, nodes, episodes: at least one
LIMIT = whole(0)          # a limit where 0 turns it off
SEED = whole(-2**63, 2**63 - 1)
SECONDS = number(0.0, above=True)
USD = number(0.0)


def label(text: Any) -> str:
    """A short name for records and reports: one line of at most 80 printable characters."""
    name = text.strip() if isinstance(text, str) else ""
    if not name or len(name) > 80 or not name.isprintable():
        raise BadValue(f"expected a name of 1 to 80 printable characters on one line, found {text!r:.100}")
    return name


def folder(text: Any) -> str:
    """A folder path: new, or an existing folder — never an existing file. A leading `~` the
    shell did not expand (`--out=~/runs`, a quoted path) is the home folder, never a new folder
    named `~` here."""
    text = os.path.expanduser(os.fspath(text))
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise BadValue(f"expected a folder to write into, found a file: {text!r}")
    return text


def out_dir(text: Any) -> str:
    """A folder to write into (`folder`), where the user may write and that lies in no environment
    folder and no other run's folder (a run nested there would be judged, exported or served as
    part of it): refused before any work, so a command never fails at its last write."""
    text = folder(text)
    _outside_envs_and_runs(Path(text), runs=True)
    _writable(Path(text))
    return text


def out_file(text: Any) -> str:
    """A file to write: new, or an existing regular file — never a folder (`~` as in out_dir), in
    a folder the user may write and outside any environment folder."""
    text = os.path.expanduser(os.fspath(text))
    path = Path(text)
    if path.is_dir():
        raise BadValue(f"expected a file to write, found a folder: {text!r}")
    if path.exists() and not path.is_file():
        raise BadValue(f"expected a regular file to write, found a special file: {text!r}")
    _outside_envs_and_runs(path.parent, runs=False)
    _writable(path.parent)
    return text


def _outside_envs_and_runs(path: Path, runs: bool) -> None:
    """Refuse `path` when it is, or lies in, an environment folder, or (`runs`) lies in the
    folder of another run (generate's, evaluate's or learn's: one holding their lock file)."""
    from envforge.pipeline import layout, records

    path = Path(os.path.abspath(path))
    for at in (path, *path.parents):
        if layout.EnvDir.at(at).is_env():
            raise BadValue(f"expected a folder outside any environment folder, found {str(at)!r}, an environment "
                           f"folder{'' if at == path else ', around it'} (what is written there would become part "
                           f"of the environment); choose another folder")
        if runs and at != path and (at / records.LOCK_FILE).exists():
            raise BadValue(f"expected a folder outside other runs' folders, found it inside {str(at)!r}, the "
                           f"folder of a run; choose another folder")


def _writable(path: Path) -> None:
    """Refuse `path` (a folder, made later if missing) when its nearest existing folder cannot be written."""
    at = Path(os.path.abspath(path))
    while not at.exists() and at != at.parent:
        at = at.parent
    if not at.is_dir():
        raise BadValue(f"expected a folder envforge can write, found a file at {str(at)!r}")
    if not os.access(at, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(at).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        found = "a read-only file system" if read_only else "no permission to write"
        raise BadValue(f"expected a folder envforge can write, found {found} at {str(at)!r}; choose another folder")


def one_of(*choices: str) -> Callable[[Any], str]:
    """One of `choices` (the command line lists them with `choices=`; Python callers get this)."""
    def parse(text: Any) -> str:
        if text not in choices:
            raise BadValue(f"expected one of {', '.join(choices)}, found {text!r}")
        return text
    parse.__name__ = "choice"
    parse.choices = choices
    return parse
