"""Ctrl-C is clean (issue 23 item 3): `evaluate --agent planner` printed 4-5 tracebacks ("Task
exception was never retrieved") blaming "a CPU or memory limit"; the resume hint after an
interrupted `generate --demo` pointed into the installed package. Each test sends SIGINT once the
command is at work (a line it prints says so) and asserts what the user sees, then runs the hint."""
from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVFORGE = str(Path(sys.executable).parent / "envforge")
NOISE = ("Traceback", "Task exception was never retrieved", "CPU or memory limit", "Exception ignored")


def interrupt_once(argv: list[str], cwd: Path, at_work: str) -> tuple[int, str]:
    """Run `envforge argv`, send SIGINT when a stderr line contains `at_work`; (exit code, stderr)."""
    proc = subprocess.Popen([ENVFORGE, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if at_work in line:
            proc.send_signal(signal.SIGINT)
            break
    seen.append(proc.stderr.read())
    proc.wait(timeout=600)
    return proc.returncode, "".join(seen)


def the_hint(stderr: str) -> list[str]:
    (command,) = [part for line in stderr.splitlines() for part in line.split("`")[1:2] if "--resume" in part]
    argv = shlex.split(command)
    assert argv[0] == "envforge"
    return argv[1:]


def test_ctrl_c_in_evaluate_with_the_planner_is_one_line_and_its_hint_resumes(tmp_path):
    argv = ["evaluate", str(ROOT / "generated_envs" / "reference"), "--agent", "planner", "--out", "ev"]
    code, stderr = interrupt_once(argv, tmp_path, "episode(s) done")
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert f"envforge evaluate: interrupted; `{shlex.join(['envforge', *argv, '--resume'])}` continues where it " \
           f"stopped" in stderr
    resumed = subprocess.run([ENVFORGE, *the_hint(stderr)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    done = int(resumed.stdout.split(" already done")[0].rsplit(" ", 1)[1])
    assert done > 0 and "60 episode(s)" in resumed.stdout


def test_the_hint_after_ctrl_c_in_generate_demo_names_the_demo_not_its_installed_files(tmp_path):
    argv = ["generate", "--demo", "--out", "run"]
    code, stderr = interrupt_once(argv, tmp_path, "code...")
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    hint = the_hint(stderr)
    assert hint == [*argv, "--resume"] and "--themes" not in hint
    resumed = subprocess.run([ENVFORGE, *hint], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert "theme(s) accepted" in resumed.stdout
