"""Static check of environment source: calls an environment has no business making.

Reading the source is cheap and names file:line, so the repair loop can fix the code
before it ever runs. The sandbox stops these calls at run time regardless.
"""
from __future__ import annotations

import ast
from pathlib import Path

from pipeline.problems import Problem

FORBIDDEN_MODULES = {
    "subprocess": "starting processes", "socket": "network access", "ctypes": "foreign calls",
    "cffi": "foreign calls", "multiprocessing": "starting processes", "threading": "threads",
    "_thread": "threads", "concurrent": "threads and processes", "asyncio": "an event loop with subprocesses and sockets",
    "http": "network access", "urllib": "network access", "requests": "network access",
    "httpx": "network access", "ftplib": "network access", "smtplib": "network access",
    "telnetlib": "network access", "ssl": "network access", "pty": "terminals",
    "signal": "signal handlers", "resource": "changing resource limits", "shutil": "moving and deleting trees",
    "pickle": "loading code-carrying data", "marshal": "loading code", "importlib": "dynamic imports",
}
FORBIDDEN_ATTRS = {
    ("os", "system"), ("os", "popen"), ("os", "fork"), ("os", "forkpty"), ("os", "kill"),
    ("os", "killpg"), ("os", "_exit"), ("os", "setuid"), ("os", "setgid"), ("os", "chroot"),
    ("os", "environ"), ("os", "getenv"), ("os", "putenv"), ("os", "remove"), ("os", "unlink"),
    ("os", "rmdir"), ("os", "removedirs"), ("sys", "exit"), ("os", "abort"),
}
FORBIDDEN_PREFIXES = {("os", "exec"), ("os", "spawn"), ("os", "posix_spawn")}
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__", "exit", "quit", "breakpoint"}


def scan_file(path: Path, rel: str) -> list[Problem]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=rel)
    except SyntaxError as e:
        return [Problem(rel, e.lineno, "valid Python", f"SyntaxError: {e.msg}", "static")]
    problems = []

    def flag(node: ast.AST, found: str) -> None:
        problems.append(Problem(rel, node.lineno, "no process, network, exit, environment or foreign calls",
                                found, "static"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in FORBIDDEN_MODULES:
                    flag(node, f"import {alias.name} ({FORBIDDEN_MODULES[top]})")
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top in FORBIDDEN_MODULES:
                flag(node, f"from {node.module} import ... ({FORBIDDEN_MODULES[top]})")
            for alias in node.names:
                if _forbidden_attr(top, alias.name):
                    flag(node, f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if _forbidden_attr(node.value.id, node.attr):
                flag(node, f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_BUILTINS:
                flag(node, f"{node.func.id}()")
    return sorted(problems, key=lambda p: p.line or 0)


def _forbidden_attr(module: str, attr: str) -> bool:
    return (module, attr) in FORBIDDEN_ATTRS or any(
        module == m and attr.startswith(prefix) for m, prefix in FORBIDDEN_PREFIXES)


def scan_env(env_dir: Path) -> list[Problem]:
    problems = []
    for path in sorted(p for p in env_dir.rglob("*.py") if "__pycache__" not in p.parts):
        problems += scan_file(path, str(path.relative_to(env_dir)))
    return problems
