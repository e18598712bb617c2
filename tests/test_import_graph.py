"""The package map as a test (issue 24): which package may import which, read from the source with
`ast` (every import statement, at module level or inside a function, `if TYPE_CHECKING:` included).

A "package" is a top-level folder (`dsl_schema`, `learning`, `envforge`) or a direct child of
`pipeline` (`pipeline.sandbox`, `pipeline.errors`, ...), named by its folder: the folders are imported
under the one import root `envforge` (`envforge.pipeline.sandbox`), which `folder_name` takes off.
LAYERS lists them from the floor up; the
README's developer section is the same map in words. A new package fails the first test until it is
given a layer here. KNOWN lists the edges that still break a rule, by rule.
"""
from __future__ import annotations

import ast
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = ("pipeline", "dsl_schema", "learning", "envforge")

# From the floor up. A package may import its own layer and the layers below it, never one above.
LAYERS: list[tuple[str, set[str]]] = [
    ("floor", {"pipeline", "pipeline.errors", "pipeline.located", "pipeline.paths", "pipeline.records",
               "pipeline.kinds", "pipeline.safe_io", "pipeline.lazy", "pipeline.terminal", "pipeline.prompts",
               "pipeline.quoting", "pipeline.testing"}),
    ("DSL", {"dsl_schema"}),
    ("env folder and runtime", {"pipeline.envfolder", "pipeline.layout", "pipeline.manifest", "pipeline.runtime"}),
    ("sandbox", {"pipeline.sandbox"}),
    ("model calls", {"pipeline.llm"}),
    # the planner, and a level's certified max reward searched with it (verify's and learn's)
    # and a level's difficulty profile (its evidence: that search and the reliability stage's episodes)
    ("search", {"pipeline.planner", "pipeline.levelmax", "pipeline.difficulty"}),
    # evaluate holds the one episode engine; check plays its episodes through it, generate's coding
    # agent runs check, verify and learning take their levels from the one level factory.
    ("capabilities", {"pipeline.evaluate", "pipeline.check", "pipeline.levelfactory", "pipeline.verify",
                      "pipeline.generate", "learning", "pipeline.probe", "pipeline.reskin", "pipeline.review"}),
    ("library", {"pipeline.library", "pipeline.api"}),
    ("commands and the Python API", {"pipeline.commands", "pipeline.cli", "pipeline.argtypes", "envforge",
                                     "envforge.__main__"}),
]
LAYER_OF = {package: index for index, (_, packages) in enumerate(LAYERS) for package in packages}
# where flags are parsed; envforge/__main__.py is the command line's second door (`python -m envforge`)
COMMAND_LAYER = {"pipeline.commands", "pipeline.cli", "pipeline.argtypes", "envforge.__main__"}
DEV_KIT = "pipeline.testing"  # offline stand-ins for the tests, benchmarks and scripts; never the product's

# Edges that break a rule, each named with the rule it breaks (issue 24): none is left, so a test
# fails on any such edge.
KNOWN: dict[str, set] = {
    "circle": set(),
    "api and commands": set(),
    "worker side": set(),
}


def _against_known(rule: str, found: dict, what: str) -> None:
    new = {edge: where for edge, where in found.items() if edge not in KNOWN[rule]}
    gone = KNOWN[rule] - set(found)
    assert not new, f"{what}:\n" + _show(new)
    if gone:
        warnings.warn(f"fixed, delete from KNOWN[{rule!r}] in tests/test_import_graph.py: {sorted(gone)}", stacklevel=2)


def folder_name(module: str) -> str:
    """`envforge.pipeline.x` -> `pipeline.x`: an imported name by the checkout folder it lives in."""
    parts = module.split(".")
    return ".".join(parts[1:]) if len(parts) > 1 and parts[0] == "envforge" and parts[1] in TOP_LEVEL else module


def package_of(module: str) -> str | None:
    parts = folder_name(module).split(".")
    if parts[0] not in TOP_LEVEL:
        return None
    if parts[:2] == ["envforge", "__main__"]:
        return "envforge.__main__"
    return ".".join(parts[:2]) if parts[0] == "pipeline" and len(parts) > 1 else parts[0]


def module_of(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for top in TOP_LEVEL:
        for path in sorted((ROOT / top).rglob("*.py")):
            name, is_package = module_of(path)
            found[name] = (path, is_package)
    return found


MODULES = _modules()


def imports_of(name: str) -> list[tuple[str, int]]:
    """(imported module, line) for each import in module `name`; `from a import b` names a.b when
    a.b is a module of ours, else a."""
    path, is_package = MODULES[name]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(folder_name(alias.name), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = folder_name(node.module or "")
            for alias in node.names:
                target = folder_name(f"{source}.{alias.name}")
                found.append((target if target in MODULES else source, node.lineno))
    return found


def _edges() -> dict[tuple[str, str], list[str]]:
    """(from package, to package) -> where: 'path:line' of each import along that edge."""
    edges = defaultdict(list)
    for name, (path, _) in MODULES.items():
        for target, line in imports_of(name):
            source_package, target_package = package_of(name), package_of(target)
            if target_package and target_package != source_package:
                where = f"{path.relative_to(ROOT)}:{line}"
                if where not in edges[(source_package, target_package)]:
                    edges[(source_package, target_package)].append(where)
    return dict(edges)


EDGES = _edges()
PACKAGES = {package_of(name) for name in MODULES}


def _show(edges) -> str:
    return "\n".join(f"  {a} -> {b}  ({', '.join(where[:3])}{', ...' if len(where) > 3 else ''})"
                     for (a, b), where in sorted(edges.items()))


def test_every_package_has_a_layer():
    assert sorted(PACKAGES - set(LAYER_OF)) == [], "give each new package a layer in LAYERS"


def test_no_package_imports_a_higher_layer():
    upward = {(a, b): where for (a, b), where in EDGES.items()
              if a in LAYER_OF and b in LAYER_OF and LAYER_OF[b] > LAYER_OF[a]}
    assert not upward, "imports from a lower layer to a higher one:\n" + _show(upward)


def test_no_circle_among_packages():
    graph = defaultdict(set)
    for a, b in EDGES:
        graph[a].add(b)

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    circles = {(a, b): where for (a, b), where in EDGES.items() if a in reach(b)}
    _against_known("circle", circles, "edges on a circle (each leads back to where it started)")


def test_the_python_api_and_the_commands_never_import_each_other():
    cli_side = {"pipeline.commands", "pipeline.cli", "envforge.__main__"}
    crossing = {(a, b): where for (a, b), where in EDGES.items()
                if (a == "envforge" and b in cli_side) or (a in cli_side and b == "envforge")}
    _against_known("api and commands", crossing, "envforge/ and the commands both build on the library")


def test_no_command_imports_another_command():
    commands = {name for name in MODULES if name.startswith("pipeline.commands.")
                and not name.rpartition(".")[2].startswith("_")}
    crossing = sorted(f"{name} imports {target} ({MODULES[name][0].relative_to(ROOT)}:{line})"
                      for name in commands for target, line in imports_of(name)
                      if target in commands and target != name)
    assert not crossing, "\n".join(crossing)


def test_argparse_only_in_the_command_layer():
    outside = sorted(f"{MODULES[name][0].relative_to(ROOT)}:{line}" for name in MODULES
                     for target, line in imports_of(name)
                     if target.split(".")[0] == "argparse" and package_of(name) not in COMMAND_LAYER)
    assert not outside, "argparse outside pipeline/commands, pipeline/cli.py and pipeline/argtypes.py:\n" + \
        "\n".join(outside)


def test_learning_takes_its_levels_from_the_level_factory_never_from_verify():
    """verify's context, options and stages are verify's alone (issue 24): learn makes and certifies
    its training levels through pipeline.levelfactory and pipeline.levelmax, as verify does."""
    borrowed = {(a, b): where for (a, b), where in EDGES.items() if a == "learning" and b == "pipeline.verify"}
    assert not borrowed, "learning imports pipeline.verify:\n" + _show(borrowed)


def test_the_dev_kit_is_never_imported_by_the_product():
    users = {(a, b): where for (a, b), where in EDGES.items() if b == DEV_KIT}
    assert not users, "pipeline/testing/ serves the tests, benchmarks and scripts only:\n" + _show(users)


def test_the_worker_side_of_the_sandbox_never_imports_the_host_side():
    """pipeline/sandbox/inside/ runs in the confined worker; pipeline/sandbox/outside/ in envforge's
    own process. The worker needs nothing of the host's code (the host may read the worker's
    constants, such as its mount point)."""
    crossing = {}
    for name in MODULES:
        if name.startswith("pipeline.sandbox.inside"):
            for target, line in imports_of(name):
                if target.startswith("pipeline.sandbox.outside"):
                    where = f"{MODULES[name][0].relative_to(ROOT)}:{line}"
                    crossing.setdefault((name, target), [])
                    if where not in crossing[(name, target)]:
                        crossing[(name, target)].append(where)
    _against_known("worker side", crossing, "the worker side imports the host side")


@pytest.mark.parametrize("folder", ["benchmarks", "scripts", "examples"])
def test_benchmarks_scripts_and_examples_do_not_import_the_tests(folder):
    tests_names = {path.stem for path in (ROOT / "tests").glob("*.py")}
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        text = path.read_text()
        if '"tests"' in text or "'tests'" in text or "/ \"tests\"" in text:
            found.append(f"{path.relative_to(ROOT)}: puts tests/ on sys.path")
        for node in ast.walk(ast.parse(text, str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {n}" for n in names
                      if n.split(".")[0] in tests_names | {"tests"}]
    assert not found, "\n".join(found)


def test_envforge_imports_its_own_folders_only_under_the_one_import_root():
    """`pipeline`, `learning` and `dsl_schema` are folders of the checkout, installed as envforge.pipeline,
    ... (issue 35): an import of the bare name would find some other package of that name, or none."""
    bare = []
    for path, _ in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bare += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                     if n.split(".")[0] in ("pipeline", "learning", "dsl_schema")]
    assert not bare, "imports that bypass the import root envforge:\n" + "\n".join(bare)
