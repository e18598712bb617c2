"""The AutoEnv development corpus (twelve AutoEnv-36 environments) as test data.

Found at $ENVFORGE_AUTOENV_DEV, else `shared/autoenv-dev` beside the checkout (or beside the
folder holding it, for a worktree). Tests copy an environment to a temporary folder before
running anything on it, and skip, saying why, where the corpus is absent.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("1_InterDimension", "3_BackwardTimes", "4_MagneticField", "13_OpticalAnalysis",
         "15_SystemEngineering", "20_GridNavigation", "22_ColumnStrategy", "23_DangerDetection",
         "24_MemoryMatching", "25_PatternMatching", "26_TileArrangement", "30_ObjectManipulation")


def corpus_dir() -> Path | None:
    candidates = [os.environ.get("ENVFORGE_AUTOENV_DEV")] + [
        str(base / "shared" / "autoenv-dev") for base in (ROOT.parent, ROOT.parent.parent)]
    return next((Path(c) for c in candidates if c and (Path(c) / NAMES[0]).is_dir()), None)


def copy_env(name: str, dest: Path) -> Path:
    """A writable private copy of one corpus environment (the corpus itself may be read-only)."""
    source = corpus_dir()
    if source is None:
        pytest.skip("AutoEnv development corpus not found: set ENVFORGE_AUTOENV_DEV or place it "
                    "at ../shared/autoenv-dev beside the checkout")
    target = dest / name
    shutil.copytree(source / name, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target
