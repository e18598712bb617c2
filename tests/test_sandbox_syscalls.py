"""The worker gets a fresh, empty keyring and a seccomp filter (issue 15, group 2).

Each test runs a driver in a subprocess that first joins a session keyring of its own holding a
canary key, as envforge would under a login session, so the test runner's keyring is not touched.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_kit import CANARY, Host, assert_no_canary

from envforge.pipeline.sandbox.inside.syscalls import DENIED, seccomp_available

pytestmark = pytest.mark.skipif(not seccomp_available()[0], reason=f"no seccomp here: {seccomp_available()[1]}")

SETUP = """
import ctypes, json, os, sys
import pyseccomp
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL = pyseccomp.resolve_syscall(pyseccomp.system_arch(), "keyctl")
ADD_KEY = pyseccomp.resolve_syscall(pyseccomp.system_arch(), "add_key")
canary = sys.argv[1].encode()
assert libc.syscall(KEYCTL, 1, b"envforge-test-session") >= 0, "cannot join a session keyring"
assert libc.syscall(ADD_KEY, b"user", b"envforge-canary", canary, len(canary), -3) >= 0, "cannot add a key"


def session_keys():
    buf = ctypes.create_string_buffer(4096)
    size = libc.syscall(KEYCTL, 11, -3, buf, 4096)
    out = []
    for i in range(0, max(size, 0), 4):
        payload = ctypes.create_string_buffer(4096)
        n = libc.syscall(KEYCTL, 11, int.from_bytes(buf.raw[i:i + 4], "little"), payload, 4096)
        out.append(payload.raw[:max(n, 0)].decode())
    return out
"""

KEYRING_ONLY = SETUP + """
before = session_keys()
r, w = os.pipe()
if os.fork() == 0:
    from envforge.pipeline.sandbox.inside.syscalls import fresh_session_keyring
    fresh_session_keyring()
    os.write(w, json.dumps(session_keys()).encode())
    os._exit(0)
os.wait()
print(json.dumps({"before": before, "child": json.loads(os.read(r, 65536))}))
"""

IN_WORKER = SETUP + """
from envforge.pipeline.sandbox import SandboxLimits, SandboxFailure, Worker
worker = Worker(sys.argv[2], SandboxLimits(call_seconds=60))
inner = [l for l in open(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children").read().split()]
pid = int(inner[0]) if inner else worker.proc.pid
seccomp = [l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("Seccomp:")][0]
worker.call("reset", level="levels/level_01.yaml")
try:
    worker.call("step", action={"action": "go", "params": {}})
    failure = None
except SandboxFailure as f:
    failure = {"kind": f.kind, "detail": f.detail, "where": f.where, "output": f.output}
worker.close()
print(json.dumps({"before": session_keys(), "seccomp": seccomp, "failure": failure}))
"""


def run(driver: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", driver, CANARY, *args], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_fresh_session_keyring_holds_none_of_the_parents_keys():
    result = run(KEYRING_ONLY)
    assert result["before"] == [CANARY]  # the driver's own keyring does hold the canary
    assert result["child"] == []


def test_env_calling_keyctl_ptrace_unshare_or_mount_is_refused_by_the_filter(host: Host):
    env_dir = host.env("keyring_and_trace")
    result = run(IN_WORKER, str(env_dir))
    assert result["before"] == [CANARY]
    assert result["seccomp"] == "2"  # filter mode, in the process running the env
    failure = result["failure"]
    # keyctl and ptrace(TRACEME) succeed for any unprivileged process: EPERM is the filter's.
    assert (failure["kind"], failure["detail"]) == (
        "exception", "RuntimeError in reward(): keyctl=EPERM ptrace=EPERM unshare=EPERM mount=EPERM; keys: []")
    assert failure["where"].startswith("env_main.py:")
    assert_no_canary("the failure", json.dumps(failure))


def test_the_denied_list_names_the_calls_an_env_has_no_business_making():
    for name in ("keyctl", "add_key", "request_key", "ptrace", "mount", "umount2", "pivot_root", "unshare",
                 "setns", "bpf", "init_module", "finit_module", "delete_module", "kexec_load", "reboot",
                 "perf_event_open", "userfaultfd", "process_vm_readv", "process_vm_writev"):
        assert name in DENIED
