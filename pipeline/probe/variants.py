"""Derived variants of an environment, in private copies; the original folder is never edited.

The copy keeps every file, renames env_main.py to _envforge_original.py and gets a new env_main.py
whose env class is a subclass of the original (pipeline.probe.variant_env, run in the sandbox like
all env code). A DSL constant change is written into the copy's config.yaml. Which swap, state
constant or planning goal is active is chosen per call with `select`, so one worker serves many.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import yaml

from envforge.pipeline import layout
from envforge.pipeline.envfolder.spec import EnvSpec, read_config
from envforge.pipeline.probe.variant_env import set_path
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

ORIGINAL = "_envforge_original"
WRAPPER = f'''"""A derived variant of this environment, written by envforge probe in a private copy."""
import {ORIGINAL} as _original
from {ORIGINAL} import *  # noqa: F401,F403 - other env files may import names from env_main

globals().update({{k: v for k, v in vars(_original).items() if not k.startswith("__")}})

from envforge.pipeline.probe.variant_env import derive  # noqa: E402

Variant = derive(_original, __name__)


def select(spec):
    Variant.spec = dict(spec or {{}})
    return sorted(Variant.spec)
'''


@contextlib.contextmanager
def variant_worker(env_dir: str | Path, skin: str | None = None, config_change: dict | None = None,
                   limits: SandboxLimits | None = None) -> Iterator[EnvClient]:
    """A worker holding a variant of `env_dir`; `config_change` = {"path": "a.b", "value": v} edits
    the copy's config.yaml. The step cap is the copy's config.yaml's."""
    source = Path(env_dir).resolve()
    with tempfile.TemporaryDirectory(prefix="envforge-variant-") as tmp:
        copy = Path(tmp) / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", layout.GENERATED_LEVELS))
        (copy / layout.ENV_MAIN).rename(copy / f"{ORIGINAL}.py")
        (copy / layout.ENV_MAIN).write_text(WRAPPER, encoding="utf-8")
        if config_change:
            config = read_config(copy)
            set_path(config, config_change["path"], config_change["value"])
            (copy / layout.CONFIG).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        with EnvClient.open(EnvSpec.open(copy), limits, skin=skin) as env:
            yield env


def select(env: EnvClient, spec: dict | None) -> None:
    env.call_function(layout.ENV_MAIN.removesuffix(".py"), "select", [spec or {}])

