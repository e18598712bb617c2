"""Forged worker replies through the real commands (issue 15, group 3).

tests/hostile/forged_reply replaces the worker's own reply encoder, so each reply below reaches
the host exactly as the environment wrote it. `check`, `verify` and `evaluate`, run as real
subprocesses, each end with the host's one-line reason, their usual exit code and no traceback;
`verify --write` rejects and records no NaN or infinity; and the next clean run passes.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env

pytestmark = pytest.mark.slow  # measured: check, verify and evaluate run whole for each forgery

HOSTILE = Path(__file__).parent / "hostile"

# forgery -> (the reason the host gives, the commands whose path meets the forged reply)
FORGERIES = {
    "nan": (r"protocol: reply to 'step': reply\.reward: expected a finite number, found nan",
            ("check", "verify", "evaluate")),
    "huge_int": (r"protocol: reply to 'step': reply\.reward: expected a number a float can hold, "
                 r"found an integer of 401 digits", ("check", "verify", "evaluate")),
    "shape": (r"protocol: reply to 'step': expected a mapping, found list", ("check", "verify", "evaluate")),
    "deep": (r"protocol: reply to 'step' is nested too deep", ("check", "verify", "evaluate")),
    "huge_string": (r"protocol: reply to 'step' is larger than 32 MB", ("check", "verify", "evaluate")),
    "infinite_bound": (r"protocol: reply to 'validate': reply\.max_reward: expected a finite number, found inf",
                       ("check", "verify")),
}
ARGS = {"check": [], "verify": ["--write"], "evaluate": ["--agent", "random", "--max-levels", "1", "--runs", "1"]}


def no_constant(name: str):
    raise AssertionError(f"a record holds {name}")


def run(command: str, env: Path, tmp: Path) -> subprocess.CompletedProcess:
    out = ["--out", tmp / f"out-{command}"] if command == "evaluate" else []
    return envforge(command, env, *ARGS[command], *out, cwd=tmp, traceback_ok=True)  # asserted below, per command


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_reply_is_refused_by_every_command_and_the_next_run_is_clean(tmp_path, forgery):
    reason, commands = FORGERIES[forgery]
    env = tmp_path / "forged_reply"
    shutil.copytree(HOSTILE / "forged_reply", env)
    (env / "forge.txt").write_text(forgery)
    for command in commands:
        done = run(command, env, tmp_path)
        output = done.stdout + done.stderr
        assert done.returncode == 1, f"{command}: {output}"
        assert re.search(reason, output), f"{command}: {output}"
        assert "Traceback" not in output, f"{command}: {output}"
        if command == "verify":
            assert re.search(r"^REJECTED at \w+: ", done.stdout, re.M), output
            assert "ACCEPTED" not in output
    for path in [*env.rglob("*"), *tmp_path.glob("out-*/**/*")]:
        if path.is_file() and path.suffix in (".json", ".jsonl", ".csv", ".md"):
            text = path.read_text()
            assert "1" + "0" * 400 not in text, path
            lines = text.splitlines() if path.suffix == ".jsonl" else [text] if path.suffix == ".json" else []
            for line in lines:
                json.loads(line, parse_constant=no_constant)  # a recorded NaN or Infinity raises here

    clean = run("check", write_env(tmp_path / "clean"), tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
