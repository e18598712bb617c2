"""Static check of environment source: calls an environment has no business making.

Reading the source is cheap and names file:line, so the repair loop can fix the code
before it ever runs. The sandbox stops these calls at run time regardless.
"""
from __future__ import annotations

import ast
from pathlib import Path

from dsl_schema.problems import Problem

FORBIDDEN_MODULES = {
    "subprocess": "starting processes", "socket": "network access", "ctypes": "foreign calls",
    "cffi": "foreign calls", "multiprocessing": "starting processes", "threading": "threads",
    "_thread": "threads", "concurrent": "threads and processes", "asyncio": "an event loop with subprocesses and sockets",
    "http": "network access", "urllib": "network access", "requests": "network access",
    "httpx": "network access", "ftplib": "network access", "smtplib": "network access",
    "telnetlib": "network access", "ssl": "network access", "pty": "terminals",
    "resource": "changing resource limits", "marshal": "loading code",
}
# Confined by the sandbox anyway, and seen in sound environments: reported as warnings.
DISCOURAGED_MODULES = {
    "signal": "signal handlers", "shutil": "moving and deleting trees",
    "pickle": "loading code-carrying data", "importlib": "dynamic imports",
}
FORBIDDEN_ATTRS = {
    ("os", "system"), ("os", "popen"), ("os", "fork"), ("os", "forkpty"), ("os", "kill"),
    ("os", "killpg"), ("os", "_exit"), ("os", "setuid"), ("os", "setgid"), ("os", "chroot"),
    ("os", "environ"), ("os", "getenv"), ("os", "putenv"), ("sys", "exit"), ("os", "abort"),
}
DISCOURAGED_ATTRS = {("os", "remove"), ("os", "unlink"), ("os", "rmdir"), ("os", "removedirs")}
FORBIDDEN_PREFIXES = {("os", "exec"), ("os", "spawn"), ("os", "posix_spawn")}
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__", "exit", "quit", "breakpoint"}


def scan_file(path: Path, rel: str) -> list[Problem]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=rel)
    except SyntaxError as e:
        return [Problem(rel, "", "valid Python", f"SyntaxError: {e.msg}", line=e.lineno, check="static")]
    problems = []

    def flag(node: ast.AST, found: str, severity: str = "error") -> None:
        problems.append(Problem(rel, "", "no process, network, exit, environment or foreign calls",
                                found, severity, node.lineno, "static"))

    def module(node: ast.AST, name: str, text: str) -> None:
        top = name.split(".")[0]
        if top in FORBIDDEN_MODULES:
            flag(node, f"{text} ({FORBIDDEN_MODULES[top]})")
        elif top in DISCOURAGED_MODULES:
            flag(node, f"{text} ({DISCOURAGED_MODULES[top]})", "warning")

    def attr(node: ast.AST, mod: str, name: str, text: str) -> None:
        if _forbidden_attr(mod, name):
            flag(node, text)
        elif (mod, name) in DISCOURAGED_ATTRS:
            flag(node, text, "warning")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module(node, alias.name, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            module(node, node.module, f"from {node.module} import ...")
            for alias in node.names:
                attr(node, node.module.split(".")[0], alias.name, f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attr(node, node.value.id, node.attr, f"{node.value.id}.{node.attr}")
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
