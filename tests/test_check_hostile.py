"""`envforge check` on each hostile env folder, run as a real subprocess (issue 2, item 8).

It must exit 1 and print the specific reason as `file[:line]: expected …, found <kind>: …`,
and leave the host as it found it: no secret in what it prints or in any file, no connection
to the loopback listener, nothing written outside, no worker process or temp dir left behind.
"""
from __future__ import annotations

import ctypes
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sandbox_kit import NAMESPACES, NOT_CONFINED, Host, assert_no_canary, files_under

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ENVFORGE = [str(Path(sys.executable).parent / "envforge")]
PR_SET_CHILD_SUBREAPER = 36

# case -> regex one printed line must match. Visible forbidden calls stop at the static scan;
# hidden ones must be stopped by the sandbox while check exercises the env.
REASONS = {
    "infinite_loop": r"env_main\.py: expected step\(go\(\)\) to succeed, found timeout: 'step' took longer than \d+s",
    "allocate_gigabytes": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found memory: MemoryError",
    "fork_bomb": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found exception: BlockingIOError",
    "thread_spawn": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found exception: RuntimeError( in"
    r" \w+\(\))?: can't start new thread",
    "steal_credentials": r"env_main\.py:\d+: expected no process, network, exit, environment or foreign calls,"
    r" found os\.environ",
    "connect_loopback": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found exception:"
    r" PermissionError( in \w+\(\))?: .*Operation not permitted",  # socket() refused
    "write_outside": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found exception:"
    r" (FileNotFoundError|PermissionError)",
    "exit_in_step": r"env_main\.py:\d+: expected no process, network, exit, environment or foreign calls, found"
    r" os\._exit",
    "flood_output": r"env_main\.py: expected step\(go\(\)\) to succeed, found output_limit: printed more than \d+ KB",
    "nan_reward": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found invalid_reward: reward: expected"
    r" a finite number, found nan",
    "string_reward": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found invalid_reward: reward:"
    r" expected a finite number, found '1\.0'",
    "not_json_observation": r"env_main\.py: expected step\(go\(\)\) to succeed, found not_json: reply is not"
    r" plain JSON",
    "import_time_loop": r"env_main\.py: expected env_main\.py to import .*, found timeout: 'load' took longer"
    r" than \d+s",
    "huge_reply": r"env_main\.py: expected step\(go\(\)\) to succeed, found protocol: reply to 'step' is larger"
    r" than \d+ MB",
    "sigxcpu": r"env_main\.py: expected step\(go\(\)\) to succeed, found (timeout|cpu_limit): ",
    "sigxcpu_ignored": r"env_main\.py: expected step\(go\(\)\) to succeed, found (timeout|crash): ",
    "kill_parent": r"env_main\.py:\d+: expected step\(go\(\)\) to succeed, found exception: PermissionError",  # seccomp
    "setsid_escape": r"env_main\.py: expected step\(go\(\)\) to succeed, found timeout: 'step' took longer than \d+s",
}
CONFINED = {"fork_bomb", "thread_spawn", "connect_loopback", "write_outside", "kill_parent", "setsid_escape"}
# Envs whose step hangs: each later check meets the same hang again (see the report of issue 2).


@pytest.fixture(scope="module", autouse=True)
def adopt_orphans():
    """Make this test process the reaper of orphans, so a worker that outlives `envforge check`
    shows up as our child instead of vanishing under init."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("cannot become a child subreaper")
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def our_children() -> list[str]:
    found = []
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                found.append(f"pid {pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:160]!r}")
            except OSError:
                pass
    return found


def temp_dirs_holding(marker: str) -> list[str]:
    return [str(level.parents[2]) for level in Path("/tmp").glob("envforge-sbx-*/env/levels/level_01.yaml")
            if marker in level.read_text(errors="replace")]


@pytest.mark.parametrize("case", sorted(REASONS))
def test_check_rejects_hostile_env_with_its_reason(case: str, host: Host):
    if case in CONFINED and not NAMESPACES:
        pytest.skip(NOT_CONFINED)
    marker = uuid.uuid4().hex
    env_dir = host.env(case, marker=marker)
    original = files_under(env_dir)
    children_before = set(our_children())
    done = subprocess.run(ENVFORGE + ["check", str(env_dir)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent.parent)

    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if not line.startswith(("warning: ", "FAILED: "))]
    assert any(re.fullmatch(REASONS[case] + ".*", line) for line in errors), done.stdout
    assert done.stdout.splitlines()[-1].startswith(f"FAILED: {env_dir}: "), done.stdout
    assert "Traceback" not in done.stderr, done.stderr

    assert_no_canary("check's output", done.stdout + done.stderr)
    for path, data in files_under(host.tmp, skip=host.planted).items():
        assert_no_canary(path, data)
    assert host.connections() == 0, "the env reached the loopback listener"
    assert list(host.outside.iterdir()) == [], "the env wrote into a host folder outside its own"
    assert not Path(host.tmp_target).exists(), "the env wrote into the host's /tmp"
    assert files_under(env_dir) == original, "check changed the env folder it was given"
    assert set(our_children()) - children_before == set(), "processes outlived envforge check"
    assert temp_dirs_holding(marker) == [], "envforge check left worker temp dirs behind"

