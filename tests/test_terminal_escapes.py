"""Terminal injection: nothing an environment writes reaches the terminal as a control sequence.

tests/hostile/terminal_escapes puts escape sequences (terminal title, clipboard write, clear
screen, bidi override), carriage returns and line breaks into its observations, its printed
output, an exception's message, its instruction and its action description. Each command, run
as a real subprocess, prints them as visible escapes: no control byte in what it prints, no line
the environment forged, its usual exit code, no traceback.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HOSTILE = Path(__file__).parent / "hostile"
ENVFORGE = [sys.executable, "-m", "envforge"]
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]")

# command -> (arguments after ENV_DIR, its exit code here)
COMMANDS = {
    "check": ([], 1),
    "verify": ([], 1),
    "evaluate": (["--agent", "random", "--runs", "1"], 1),
    "play": (["--actions", "ACTIONS"], 1),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_what_an_env_writes_is_shown_as_text_never_as_control_sequences(tmp_path, command):
    env = tmp_path / "terminal_escapes"
    shutil.copytree(HOSTILE / "terminal_escapes", env)
    (tmp_path / "actions.txt").write_text("go\ngo\ngo\n")
    args, code = COMMANDS[command]
    args = [str(tmp_path / "actions.txt") if a == "ACTIONS" else a for a in args]
    out = ["--out", str(tmp_path / "out")] if command == "evaluate" else []
    done = subprocess.run(ENVFORGE + [command, str(env), *args, *out], capture_output=True, timeout=600, cwd=tmp_path)
    output = (done.stdout + done.stderr).decode("utf-8")
    assert done.returncode == code, output
    assert "Traceback" not in output, output
    assert not CONTROL.search(output), [line for line in output.splitlines() if CONTROL.search(line)]
    assert "\r" not in output
    assert not [line for line in output.splitlines() if line.startswith(("FAILED: fake", "ok: forged"))], output
    # What the env wrote is still there to read, as escapes.
    assert r"ValueError in reward(): \x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e\nFAILED: fake" \
           r"\rok: forged" in output, output
    if command == "play":
        assert r"\x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202estep 1" in output
        assert r"Reach the end.\x1b]0;PWNED\x07\x1b[2J" in output
        assert r"Take one step.\x1b]52;c;ZXZpbA==\x07\x1b[2J" in output
