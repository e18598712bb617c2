"""Worker-side: where a fault of the environment's code is, located in its folder (the reply it
becomes is protocol.failure_reply).

Shared by the environment host (host.py) and its search (search.py), inside the sandbox.
"""
from __future__ import annotations

import inspect
import os
import sys
import traceback
from typing import Any

ROOT = [""]  # the environment folder, absolute (set by the host): what tracebacks' files are relative to


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def where() -> str:
    """file:line of the innermost traceback frame inside the environment folder."""
    found = ""
    for frame, lineno in traceback.walk_tb(sys.exc_info()[2]):
        rel = env_relative(frame.f_code.co_filename)
        if rel:
            found = f"{rel}:{lineno}" if lineno is not None else rel  # a frame may have no line number
    return found


def in_function() -> str:
    """' in NAME()' of the innermost traceback frame inside the environment folder, or ''."""
    name = ""
    for frame, _ in traceback.walk_tb(sys.exc_info()[2]):
        if env_relative(frame.f_code.co_filename):
            name = frame.f_code.co_name
    return f" in {name}()" if name and name != "<module>" else ""


def where_of(method: str, env) -> str:
    """file:line where the environment's class defines `method`."""
    fn = getattr(type(env), method, None)
    try:
        rel = env_relative(inspect.getsourcefile(fn))
        return f"{rel}:{inspect.getsourcelines(fn)[1]}" if rel else ""
    except (TypeError, OSError):
        return ""


def env_relative(filename: str | None) -> str:
    # Not the working directory: the env may have moved it, or left it unreadable.
    root = ROOT[0] or os.getcwd()
    if filename and filename.startswith(root + "/"):
        return filename[len(root) + 1:]
    return ""
