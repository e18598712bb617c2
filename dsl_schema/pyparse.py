"""`ast.parse`, one call at a time in the process.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state: when two
threads parse at once (a garbage collection inside one parse runs Python code, which lets the
other thread in), the depth check fails with `SystemError: AST constructor recursion depth
mismatch`, and generate marked a sound theme `error` about once in 15 runs. Every parse of
envforge goes through here, behind one lock.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
