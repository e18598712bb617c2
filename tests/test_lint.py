"""ruff, with the configuration in pyproject.toml ([tool.ruff]: line length 120, rules E, F, W, I, B),
finds nothing in the repository. `ruff check --fix .` fixes the import order and unused imports."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "expected ruff (the test extra: pip install -e '.[test]'), found none"
    done = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
