"""Progress in a notebook cell (issue 37): a Jupyter kernel's output stream (ipykernel's OutStream)
shows a carriage return as a redraw, so generate's progress there is one line redrawn, with each
theme's outcome kept above it, and evaluate's a redrawn bar; elsewhere a line each, as before (the
demo's own tests read those lines).
The kernel's stream is stood in for by a stream class whose module is named as ipykernel's."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a whole generate demo (about half a CPU-minute)
ROOT = Path(__file__).resolve().parent.parent

KERNEL = """
import io, sys, types
OutStream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})
cell = OutStream()
sys.stderr = cell
import envforge
getattr(envforge, sys.argv[1])(*sys.argv[2:4], **dict(a.split("=", 1) for a in sys.argv[4:]))
sys.__stdout__.write(cell.getvalue())
"""


def _cell(tmp_path, *call: str) -> str:
    done = subprocess.run([sys.executable, "-c", KERNEL, *call], cwd=tmp_path, capture_output=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.decode()  # as bytes: text=True would read each carriage return as a line break


def test_generate_in_a_notebook_cell_redraws_one_line_and_keeps_the_outcomes(tmp_path):
    shown = _cell(tmp_path, "generate", str(ROOT / "examples" / "themes.txt"), "run", "provider=replay")
    lines = shown.split("\n")
    kept = [line.rsplit("\r", 1)[-1].strip() for line in lines if line.strip()]
    # three themes: three outcomes, each a line of its own; every stage's progress redrew the line above
    assert len(kept) == 3, kept
    assert sum(" accepted -> " in k for k in kept) == 2 and sum(" rejected at reliability: " in k for k in kept) == 1
    assert shown.count("\r") > 20 and "verify: levels: 15/15 certified" in shown
    assert shown.endswith("\n")
