"""Validated types for command-line flags: every number a user types is checked once, here.

argparse turns the `ArgumentTypeError` these raise into one line naming the flag, with exit 2:
`envforge evaluate: error: argument --max-steps: expected a whole number >= 1, found '-5'`.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable


def whole(minimum: int = 1, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number in [minimum, maximum]."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {_range('a whole number', minimum, maximum)}, found {text!r}")
        return value
    parse.__name__ = "whole number"
    return parse


def number(minimum: float = 0.0, maximum: float | None = None, *, above: bool = False) -> Callable[[str], float]:
    """A finite number >= minimum (> minimum with `above`), <= maximum."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low_ok = value > minimum if above else value >= minimum
        if not math.isfinite(value) or not low_ok or (maximum is not None and value > maximum):
            what = _range("a number", minimum, maximum, strict=above)
            raise argparse.ArgumentTypeError(f"expected {what}, found {text!r}")
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


def label(text: str) -> str:
    """A short name for records and reports: one line of at most 80 printable characters."""
    name = text.strip()
    if not name or len(name) > 80 or not name.isprintable():
        raise argparse.ArgumentTypeError(f"expected a name of 1 to 80 printable characters on one line, found {text!r:.100}")
    return name


def out_dir(text: str) -> str:
    """A folder to write into: new, or an existing folder — never an existing file. A leading
    `~` the shell did not expand (`--out=~/runs`, a quoted path) is the home folder, never a new
    folder named `~` here."""
    text = os.path.expanduser(text)
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a folder to write into, found a file: {text!r}")
    return text


def out_file(text: str) -> str:
    """A file to write: new, or an existing regular file — never a folder (`~` as in out_dir)."""
    text = os.path.expanduser(text)
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file to write, found a folder: {text!r}")
    if path.exists() and not path.is_file():
        raise argparse.ArgumentTypeError(f"expected a regular file to write, found a special file: {text!r}")
    return text


def add_run_arguments(parser: argparse.ArgumentParser, *, jobs: str, concurrency: int, out: str, out_help: str,
                      resume_help: str) -> None:
    """--concurrency N, --out DIR and --resume: the flags of a command that runs many jobs into one
    output folder (evaluate, generate)."""
    parser.add_argument("--concurrency", type=COUNT, default=concurrency, metavar="N",
                        help=f"{jobs} at once (default {concurrency})")
    parser.add_argument("--out", type=out_dir, default=out, metavar="DIR", help=out_help)
    parser.add_argument("--resume", action="store_true", help=resume_help)


def add_skin_argument(parser: argparse.ArgumentParser, then: str = "") -> None:
    """--skin NAME: render through one of the environment's skins (evaluate, probe)."""
    parser.add_argument("--skin", metavar="NAME", help="render observations with the environment's skins/NAME.py "
                                                       "(written by envforge reskin, listed in its manifest)" + then)
