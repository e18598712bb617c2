"""Static check of environment source: calls an environment has no business making.

Reading the source is cheap and names file:line, so the repair loop can fix the code
before it ever runs. The sandbox stops these calls at run time regardless.
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from envforge.dsl_schema.pyparse import parse
from envforge.pipeline import safe_io
from envforge.pipeline.errors import LocatedError
from envforge.pipeline.located import Problem

MAX_SOURCE_BYTES = 2_000_000

FORBIDDEN_MODULES = {
    "subprocess": "starting processes",
    "socket": "network access",
    "ctypes": "foreign calls",
    "cffi": "foreign calls",
    "multiprocessing": "starting processes",
    "threading": "threads",
    "_thread": "threads",
    "concurrent": "threads and processes",
    "asyncio": "an event loop with subprocesses and sockets",
    "http": "network access",
    "urllib": "network access",
    "requests": "network access",
    "httpx": "network access",
    "ftplib": "network access",
    "smtplib": "network access",
    "telnetlib": "network access",
    "ssl": "network access",
    "pty": "terminals",
    "resource": "changing resource limits",
    "marshal": "loading code",
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
FORBIDDEN_BUILTINS = {"exec", "compile", "__import__", "exit", "quit", "breakpoint"}
# eval() is how model-written code often parses its own data ("(0, 1)"); it runs confined like
# everything else, so it is a warning that names the safe form.
DISCOURAGED_BUILTINS = {"eval": "text run as code; ast.literal_eval reads data"}


def scan_file(root: Path, rel: str) -> list[Problem]:
    """Problems of the Python file `rel` of the folder `root`, read through safe_io (bounded,
    never through a link); a file that cannot be read or parsed is one located problem."""
    try:
        tree = parse(safe_io.read_text(root, rel, MAX_SOURCE_BYTES, label=rel), filename=rel)
    except LocatedError as e:
        return [dataclasses.replace(e.problem, check="static")]
    except SyntaxError as e:
        return [Problem(rel, "", "valid Python", f"SyntaxError: {e.msg}", line=e.lineno, check="static")]
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes; nesting the parser cannot take
        return [Problem(rel, "", "Python the parser can read", f"{type(e).__name__}: {str(e)[:120]}", check="static")]
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
            elif node.func.id in DISCOURAGED_BUILTINS:
                flag(node, f"{node.func.id}() ({DISCOURAGED_BUILTINS[node.func.id]})", "warning")
    return sorted(problems, key=lambda p: p.line or 0)


def _forbidden_attr(module: str, attr: str) -> bool:
    return (module, attr) in FORBIDDEN_ATTRS or any(
        module == m and attr.startswith(prefix) for m, prefix in FORBIDDEN_PREFIXES)


def scan_env(env_dir: Path) -> list[Problem]:
    """Scan the environment's own code: the files envforge loads and everything they import
    from the folder. Other scripts beside it (a helper it never imports) are not the env."""
    problems = []
    for rel in import_closure(env_dir):
        problems += scan_file(env_dir, rel)
    return problems


def import_closure(env_dir: Path) -> list[str]:
    """The folder's Python files reachable by import from the files envforge loads."""
    from envforge.pipeline import layout

    todo = [name for name in layout.CODE_FILES if (env_dir / name).is_file()]
    todo += sorted(str(p.relative_to(env_dir)) for p in (env_dir / layout.SKINS).glob("*.py")
                   if p.is_file() and not p.is_symlink())
    seen: list[str] = []
    while todo:
        rel = todo.pop(0)
        if rel in seen:
            continue
        seen.append(rel)
        todo += [m for m in _local_imports(env_dir, rel) if m not in seen]
    return seen


def other_python_files(env_dir: Path) -> list[str]:
    """Python files in the folder that the environment never imports (listed, not scanned)."""
    closure = set(import_closure(env_dir))
    return sorted(rel for rel in safe_io.walk(env_dir, frozenset({"__pycache__"}))
                  if rel.endswith(".py") and rel not in closure)


def _local_imports(env_dir: Path, rel: str) -> list[str]:
    try:
        tree = parse(safe_io.read_text(env_dir, rel, MAX_SOURCE_BYTES))
    except (LocatedError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = str(Path(rel).parent).replace("/", ".").strip(".")
            module = ".".join(x for x in (base, node.module or "") if x and x != ".")
            names += [module] + [f"{module}.{a.name}".strip(".") for a in node.names]
    found = []
    for name in names:
        parts = [p for p in name.split(".") if p]
        for candidate in ("/".join(parts) + ".py", "/".join(parts + ["__init__.py"])):
            path = env_dir / candidate
            if parts and path.is_file() and not path.is_symlink():
                found.append(candidate)
    return found
