"""What envforge writes into another language's text holds hostile names as data: an exported module,
its pyproject.toml and README, the review report's HTML and the commands review suggests.

The names hold quotes of both kinds, triple quotes, newlines, braces, backslashes, backticks and
`$(...)` that would create a marker file if anything ran them."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from envforge.pipeline import __version__, quoting
from envforge.pipeline.api.export import export_verifiers, module_name
from envforge.pipeline.review.advice import advise
from envforge.pipeline.review.catalog import Entry
from envforge.pipeline.review.report import _templates, page_file, table2

ROOT = Path(__file__).resolve().parents[1]
CRATE = ROOT / "generated_envs" / "reference" / "crate_dock"


MARKER = "PWNED"  # a name, no slash: folder names hold one; each test runs its shells and imports in tmp_path


def ran(tmp_path: Path) -> list[Path]:
    """The marker files anything of a hostile name made."""
    return list(tmp_path.rglob(MARKER))


def hostile(marker: str = MARKER) -> list[str]:
    """Names that break out of a naive literal of each language; each would touch `marker`."""
    touch = f"$(touch {marker})"
    return [
        f'double"""\nimport os; os.system("touch {marker}")\n"""',
        f"single'''\nimport os; os.system('touch {marker}')\n'''",
        f'a{{}}b{{0}}c\\"\\n{touch}`touch {marker}`',
        f'q" ; touch {marker}; echo "\\',
        f"multi\nline\r\tname {touch}",
    ]


def test_each_language_reads_back_exactly_the_hostile_value(tmp_path):
    for name in hostile() + ["", "`", "``a``", "\x01\x7f\u2028"]:
        assert eval(quoting.python(name)) == name  # noqa: S307 (the literal is the point)
        assert tomllib.loads(f"k = {quoting.toml(name)}")["k"] == name
        assert "\n" not in quoting.one_line(name) and "\n" not in quoting.markdown_code(name)
        assert shlex.split(quoting.shell(name)) == [name]
        printed = subprocess.run(["sh", "-c", f"printf %s {quoting.shell(name)}"], capture_output=True, cwd=tmp_path)
        assert printed.stdout.decode() == name
    undecodable = "name\udcff"  # a folder name that is not UTF-8, as Python reads it
    assert eval(quoting.python(undecodable)) == undecodable  # noqa: S307
    assert tomllib.loads(f"k = {quoting.toml(undecodable)}")["k"] == "name\ufffd"
    assert not ran(tmp_path)


def test_exported_module_from_a_hostile_folder_name_imports_and_holds_the_name(tmp_path):
    pytest.importorskip("verifiers", reason="needs the verifiers extra (pip install 'envforge-rl[verifiers]')")
    names = hostile()
    sources = tmp_path / "envs"
    for k, name in enumerate(names):
        shutil.copytree(CRATE, sources / str(k) / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "exported"
    projects = [p for k, name in enumerate(names) for p in export_verifiers([str(sources / str(k) / name)], out)]
    assert [p.name for p in projects] == [module_name(n) for n in names]

    for name, project in zip(names, projects):
        meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        assert meta["description"] == (f"The envforge environment {quoting.one_line(name)} as a verifiers "
                                       f"environment (written by envforge {__version__}).")
        assert "\n" not in meta["description"]  # a package summary is one line
        readme = (project / "README.md").read_text(encoding="utf-8")
        assert f"The envforge environment {quoting.markdown_code(name)} as a" in readme

        module = project.name
        shown = subprocess.run(
            [sys.executable, "-c", f"import {module} as m; print(repr(m.ENV_NAME)); print(repr(m.__doc__))"],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(project)}, capture_output=True, text=True, timeout=600)
        assert shown.returncode == 0, shown.stderr
        env_name, doc = (eval(line) for line in shown.stdout.splitlines())  # noqa: S307
        assert env_name == name and f"The envforge environment {name} as a verifiers environment" in doc
    assert not ran(tmp_path)  # nothing of any name ran: not on export, not on import


def entry(name: str, folder: str, stage: str = "execution") -> Entry:
    return Entry(name=name, theme="<b>theme</b>", source="themes.txt:1", status="rejected", stage=stage,
                 reason="<script>alert(1)</script>", folder=folder, place="rejected")


def test_suggested_commands_quote_the_name_and_folder(tmp_path):
    for name in hostile():
        folder = f"/runs/{name}"
        shown = {stage: advise(SimpleNamespace(entry=entry(name, folder, stage))).next
                 for stage in ("execution", "repair", "verify")}
        retry = ["envforge", "review", "retry", name, "--from"]
        commands = {"execution": [["envforge", "check", folder], retry + ["verify"]],
                    "repair": [["envforge", "check", folder], retry + ["verify"], retry + ["repair"]],
                    "verify": [retry + ["verify"]]}
        for stage, expected in commands.items():
            for words in expected:
                command = quoting.command(*words)
                assert f"`{command}`" in shown[stage], (stage, shown[stage])
                pasted = subprocess.run(["sh", "-c", f"set -- {command}; printf '%s\\0' \"$@\""],
                                        capture_output=True, cwd=tmp_path)  # what a shell makes of the pasted line
                assert pasted.stdout.decode().split("\0")[:-1] == words
    assert not ran(tmp_path)


def test_report_index_escapes_names_and_links_to_the_page_written():
    name = '"><script>alert(1)</script><a href="x/../../etc'
    shown = entry(name, "/runs/x")
    html = _templates().get_template("index.html.j2").render(
        entries=[shown], table2=table2([shown]), plot=None, difficulty_plot=None, counts={"rejected": 1},
        generated="now", run="/runs", pages="envs", evaluations=[])
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "/" not in page_file(name) and page_file(name).endswith(".html")
    href = f'href="envs/{page_file(name).replace("%", "%25")}"'
    assert href in html  # the link names the file written, its own percent signs quoted
