"""Does an installed envforge give the same offline demo as the checkout?

Builds a wheel from a copy of the checkout, installs it into a fresh virtual environment (with
this interpreter's pip, `pip --python`: the new environment needs no pip of its own), runs
`envforge generate --demo --out runs/demo` there from an empty folder, runs README's first command
(`envforge generate --themes examples/themes.txt --provider replay`) with the editable install
that runs this script, and compares which themes each run accepted and which it rejected, at which
stage, as their output folders record them. Prints one line per side and `same demo result` or the
difference; exit 0 when the same.

    python scripts/wheel_demo.py                 # the wheel's dependencies installed from the index (CI)
    python scripts/wheel_demo.py --reuse-deps    # offline: the wheel alone, its dependencies taken
                                                 # from this interpreter's site-packages (the tests)
    python scripts/wheel_demo.py --editable-out DIR   # README's command already run by the editable
                                                 # install into DIR (the tests' session demo): not run again
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from envforge.pipeline import DISTRIBUTION

ROOT = Path(__file__).resolve().parent.parent
WHEEL_STEM = DISTRIBUTION.replace("-", "_")  # how a wheel's and its metadata's file names spell it
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "runs", "out", "*.egg-info", "__pycache__",
                              ".pytest_cache", ".hypothesis", "_data")
SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
           "ENVFORGE_MODEL", "PYTHONPATH", "VIRTUAL_ENV")


def build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=SKIP)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp / "wheel"), str(source)], check=True)
    (wheel,) = (tmp / "wheel").glob(f"{WHEEL_STEM}-*.whl")
    return wheel


def install(wheel: Path, target: Path, reuse_deps: bool) -> Path:
    venv.EnvBuilder().create(target)
    python = target / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)]
    if reuse_deps:  # this interpreter's site-packages after the new venv's own: its packages, not its checkout
        own = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                             capture_output=True, text=True).stdout.strip()
        Path(own, "envforge_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        pip.insert(6, "--no-deps")
    subprocess.run(pip, check=True)
    return target / "bin"


def demo(envforge: Path, cwd: Path, args: list[str], home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env.update(ENVFORGE_CACHE=str(home / "cache.sqlite"), ENVFORGE_DOTENV=str(home / ".env"))
    done = subprocess.run([str(envforge), "generate", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise SystemExit(
            f"{envforge} generate {' '.join(args)} in {cwd}: exit {done.returncode}\n{done.stderr[-2000:]}"
        )


def top_level_names(venv: Path) -> list[str]:
    """The import names envforge's distribution puts at the top of site-packages: the first part of
    each path its RECORD lists, the scripts and the metadata aside."""
    info = next(venv.glob(f"lib/python*/site-packages/{WHEEL_STEM}-*.dist-info"))
    names = set()
    for line in (info / "RECORD").read_text().splitlines():
        first = line.split(",")[0].split("/")[0]
        if first.endswith(".dist-info") or first == ".." or first.startswith("__editable__"):
            continue
        names.add(first.removesuffix(".py"))
    return sorted(names)


def verdicts(out: Path) -> dict:
    """The themes a generate run's output folder holds as accepted, and those it rejected with the stage."""
    rejected = out / "_rejected"
    return {"accepted": sorted(p.name for p in out.iterdir() if (p / "manifest.json").is_file()),
            "rejected": {p.name: json.loads((p / "rejection.json").read_text())["stage"]
                         for p in sorted(rejected.iterdir())} if rejected.is_dir() else {}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reuse-deps", action="store_true", help="install the wheel alone (offline)")
    parser.add_argument("--editable-out", type=Path, metavar="DIR",
                        help="the output folder of README's command already run by this editable install")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="envforge-wheel-") as name:
        tmp = Path(name)
        installed = install(build_wheel(tmp), tmp / "venv", args.reuse_deps)
        where = "import envforge.pipeline.paths as p; print(p.ROOT)"
        located = subprocess.run([str(installed / "python"), "-c", where],
                                 cwd=tmp, capture_output=True, text=True, check=True).stdout.strip()
        if not located.startswith(str(tmp / "venv")):
            raise SystemExit(f"expected the installed envforge to read its data from {tmp / 'venv'}, found {located}")
        roots = top_level_names(installed.parent)
        if roots != ["envforge"]:
            raise SystemExit(f"expected the wheel to install one import root, envforge, found {roots}")
        for name in ("pipeline", "learning", "dsl_schema"):
            if subprocess.run([str(installed / "python"), "-c", f"import {name}"], cwd=tmp,
                              capture_output=True).returncode == 0:
                raise SystemExit(f"expected `import {name}` to fail beside the installed wheel alone, found it imports")
        (tmp / "empty").mkdir()
        demo(installed / "envforge", tmp / "empty", ["--demo", "--out", "runs/demo"], tmp / "empty")
        wheel = verdicts(tmp / "empty" / "runs" / "demo")
        editable_out = args.editable_out
        if editable_out is None:
            editable_out = tmp / "editable"
            demo(Path(sys.executable).parent / "envforge", ROOT,
                 ["--themes", "examples/themes.txt", "--provider", "replay", "--out", str(editable_out)], tmp)
        editable = verdicts(editable_out)
    print(f"installed wheel, from an empty folder: {json.dumps(wheel)}")
    print(f"editable install, README's command:    {json.dumps(editable)}")
    if wheel != editable:
        print("the installed wheel's demo differs from the editable install's")
        return 1
    print("same demo result")
    return 0


if __name__ == "__main__":
    sys.exit(main())
