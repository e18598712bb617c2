"""`envforge export verifiers ENV_DIR… --out DIR`: each environment as an installable verifiers 0.4
environment package, published like any other (`pip install ENVFORGE DIR/envforge_NAME`, then
`vf-eval envforge_NAME -m MODEL --client.base-url URL`).

DIR/envforge_NAME/ holds pyproject.toml (its dependency: envforge-rl[verifiers]), README.md, and the
package envforge_NAME/: the Taskset, Env and Harness verifiers loads by the package's name
(envforge.integrations.verifiers), its `load_environment(split, skin, max_levels, **env)`, and
env/NAME/, a copy of the environment folder under its own name (what the episode records name).
The folder is copied as data: a symbolic link in it is refused, never followed, and nothing of it
is imported or run here.

`envforge-rl` is not on the package index (`envforge` there is another project), so the install
command names the wheel or checkout this envforge was installed from (pipeline.install_target).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from envforge.pipeline import DISTRIBUTION, __version__, install_target, layout, quoting
from envforge.pipeline.errors import UserError, write_fault

MAX_FOLDER_BYTES = 512 * 1024 * 1024
MAX_FOLDER_FILES = 10_000
NOTHING_LEFT = "no part of the package is left behind"

PYPROJECT = '''[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = {description}
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["{distribution}[verifiers]>={version}"]

[tool.setuptools]
packages = ["{module}"]
include-package-data = true

[tool.setuptools.package-data]
"{module}" = ["env/**/*"]
'''

MODULE = '''{docstring}
from pathlib import Path

from envforge.integrations import verifiers as _envforge

ENV_NAME = {name}
ENV_DIR = Path(__file__).resolve().parent / "env" / ENV_NAME


class Taskset(_envforge.LevelsTaskset):
    ENV_DIR = ENV_DIR


PlayEnv = _envforge.PlayEnv
ChatHarness = _envforge.ChatHarness

__all__ = ["Taskset", "PlayEnv", "ChatHarness", "load_environment"]


def load_environment(split: str = "test", skin: str | None = None, max_levels: int | None = None, **env):
    """The environment as a verifiers Env, in this process (envforge.integrations.verifiers.load_environment)."""
    return _envforge.load_environment(__name__, split=split, skin=skin, max_levels=max_levels, **env)
'''

README = '''# {dist}

The envforge environment {name} as a [verifiers](https://pypi.org/project/verifiers/) 0.4 environment,
written by `envforge export verifiers` (envforge {version}). Each level is a task; each rollout
plays its level in an envforge sandbox worker; the reward is envforge's normalized reward.

Its dependency, `{distribution}`, is not on the package index under that name (`envforge` there is
another project): install it from the wheel or checkout envforge was installed from, with this folder,
in one command:

    pip install {target} .
    vf-eval {module} -m MODEL --client.base-url OPENAI_COMPATIBLE_URL --client.api-key-var OPENAI_API_KEY -n 5
'''


def install_command(project: Path) -> str:
    """The one pip command that installs an exported project with the envforge it needs."""
    return f"pip install {quoting.shell(install_target('verifiers'))} {quoting.shell(str(project))}"


def module_name(env_name: str) -> str:
    """The Python module an environment exports as: envforge_ and its name, lower case, with
    anything that is not a letter, digit or underscore made an underscore."""
    return "envforge_" + (re.sub(r"\W", "_", env_name.lower(), flags=re.ASCII).strip("_") or "env")


def export_verifiers(env_dirs: list[str], out: str | Path) -> list[Path]:
    """Write one project per environment under `out`; returns their folders."""
    envs = environments(env_dirs)
    names = [module_name(e.name) for e in envs]
    distinct(names, "module names")
    out = Path(out)
    written = []
    for env, module in zip(envs, names):
        project = out / module
        if project.exists():
            raise UserError(f"--out {out}: expected no {module}/ there yet (nothing is overwritten), found one")
        try:
            out.mkdir(parents=True, exist_ok=True)
            # Written whole beside its place, then renamed into it: a project cut short (a full disk, a
            # kill) is never left where a retry would find it "already there".
            staging = Path(tempfile.mkdtemp(prefix=f".{module}.partial-", dir=out))
            try:
                _write_project(env, module, staging, project)
                os.rename(staging, project)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        except OSError as e:
            raise (write_fault(e, project, kept=NOTHING_LEFT) or e) from None
        written.append(project)
    return written


def environments(env_dirs: list[str]) -> list[layout.EnvDir]:
    """The environment folders ENV_DIR… name, each a folder or a folder holding some (every exporter's)."""
    return [e for d in env_dirs for e in (layout.find_envs(d) or _none(d))]


def distinct(names: list[str], what: str) -> None:
    """What the exported environments are named by must differ (their folders would collide)."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"ENV_DIR: expected environments whose {what} differ, found {', '.join(twice)} twice")


def _write_project(env: layout.EnvDir, module: str, project: Path, shown: Path) -> None:
    """The project in the folder `project`, to be renamed to `shown` (what an error names)."""
    package = project / module
    copy_folder(env.path, package / "env" / env.name, shown / module / "env" / env.name, kept=NOTHING_LEFT)
    # The name is the folder's, so any text: each file quotes it for its own language.
    common = {"module": module, "dist": module.replace("_", "-"), "version": __version__,
              "distribution": DISTRIBUTION, "target": quoting.shell(install_target("verifiers"))}
    about = (f"The envforge environment {quoting.one_line(env.name)} as a verifiers environment (written by "
             f"envforge {__version__}).")
    (project / "pyproject.toml").write_text(PYPROJECT.format(**common, description=quoting.toml(about)),
                                            encoding="utf-8")
    (project / "README.md").write_text(README.format(**common, name=quoting.markdown_code(env.name)),
                                       encoding="utf-8")
    docstring = (f"The envforge environment {env.name} as a verifiers environment (written by `envforge export "
                 "verifiers`).\nIts code runs in envforge's sandbox workers; this module only points envforge "
                 "at its copy under env/.\nverifiers loads it by name (`vf-eval MODULE ...`): the Taskset, Env "
                 "and Harness below, from __all__.")
    (package / "__init__.py").write_text(MODULE.format(docstring=quoting.python(docstring),
                                                       name=quoting.python(env.name)), encoding="utf-8")


def _none(path: str):
    raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) or a folder "
                    "holding some, found none")


def copy_folder(source: Path, target: Path, shown: Path | None = None,
                kept: str = "what was written before is kept") -> None:
    """Copy the folder's files and folders but what it does not need to run (layout.NOT_SHIPPED);
    a link, device or pipe in it is refused, the size bounded. A failed write names its file as
    `shown` (where the copy is going; default `target`) and the fault (errors.write_fault)."""
    shown = target if shown is None else shown
    total = count = 0
    for root, dirs, files in os.walk(source, followlinks=False):
        here = Path(root)
        for name in dirs + files:
            path = here / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                raise UserError(f"{path}: expected a regular file or folder in the environment folder, found "
                                f"{'a symbolic link' if path.is_symlink() else 'a special file'} (not exported)")
            count += 1
            total += path.lstat().st_size if path.is_file() else 0
        if count > MAX_FOLDER_FILES or total > MAX_FOLDER_BYTES:
            raise UserError(f"{source}: expected at most {MAX_FOLDER_FILES} files and {MAX_FOLDER_BYTES >> 20} MB, "
                            f"found more")
        dirs[:] = [d for d in dirs if d not in layout.NOT_SHIPPED]

    def copy(src: str, dst: str) -> None:
        try:
            shutil.copy2(src, dst)
        except OSError as e:  # raised as itself, not gathered into copytree's shutil.Error
            raise (write_fault(e, shown / Path(dst).relative_to(target), kept=kept) or e) from None

    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(*layout.NOT_SHIPPED),
                    copy_function=copy)
