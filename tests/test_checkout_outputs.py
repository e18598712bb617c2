"""Everything the README's examples write, run from the checkout, is ignored by git (issue 37): a
user who follows them leaves the checkout clean, and the suite's lint and import checks, which read
the checkout, do not read their output (`export verifiers --out exported` put Python files there
that ruff then failed on)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"[A-Z_]{3,}|[<…$]")  # DIR, FILE, EVAL_DIR, <name>, …


def readme_outputs() -> set[str]:
    """The paths the README's commands write to: every `--out X`, `review html X`, `pip wheel .`."""
    text = (ROOT / "README.md").read_text()
    named = set(re.findall(r"--out[ =]([^\s`|\]]+)", text)) | set(re.findall(r"review html ([^\s`|\]]+)", text))
    found = {p.rstrip("/") for p in named if not PLACEHOLDER.search(p)}
    if "pip wheel ." in text:
        found.add("envforge_rl-0.1.0-py3-none-any.whl")  # and its dependencies' wheels, all *.whl
    return found


def default_outputs() -> set[str]:
    """Where the commands write when no --out is given (the options classes' defaults)."""
    from envforge.pipeline import paths
    from envforge.pipeline.api.evaluate import EvaluateOptions
    from envforge.pipeline.api.learn import LearnOptions

    generated = Path(paths.GENERATED_ENVS_DIR)
    generated = generated.relative_to(ROOT) if generated.is_absolute() else generated
    return {EvaluateOptions().out, LearnOptions().out, f"{generated}/a_maze_9c00aa",  # generate's
            "crate_dock.predict.jsonl",  # probe's ./<env>.<kinds>.jsonl
            "logs"}  # Inspect AI's log folder (`inspect eval`, `inspect view`)


def test_what_the_readme_examples_write_in_the_checkout_is_ignored_by_git():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an installed copy): nothing to keep clean")
    outputs = readme_outputs() | default_outputs()
    assert {"exported", "table3", "table5", "crate_dock.jsonl", "audit.md", "report", "evaluation"} <= outputs
    # A file in each (a folder's pattern matches only a folder that exists; a file's, its name as a parent too).
    inside = sorted(f"{p}/written" for p in outputs if not p.startswith(("/", "..")))
    done = subprocess.run(["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *inside], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    not_ignored = [line.split("\t")[-1].removesuffix("/written") for line in done.stdout.splitlines()
                   if line.startswith("::")]
    assert not_ignored == [], f"README examples write these into the checkout, and .gitignore does not ignore them: " \
                              f"{not_ignored}"
    tracked = subprocess.run(["git", "check-ignore", "--no-index", "generated_envs/reference/crate_dock/env_main.py"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert tracked.returncode == 1, "the reference environments must stay tracked"
