"""`envforge doctor` as a real subprocess against the loopback server."""
import os
import subprocess
import sys

from envforge.pipeline.testing.llm_server import Fault, Reply

LEAKY = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
         "ENVFORGE_MODEL", "ENVFORGE_PRICES")


def doctor(tmp_path, *args, **env):
    base = {k: v for k, v in os.environ.items() if k not in LEAKY}
    base.update(ENVFORGE_DOTENV=str(tmp_path / ".env"), ENVFORGE_CACHE=str(tmp_path / "cache.sqlite"),
                ENVFORGE_RETRY_BASE_DELAY="0.01", NO_PROXY="127.0.0.1,localhost", **env)
    return subprocess.run([sys.executable, "-m", "envforge", "doctor", *args], env=base, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_doctor_retries_a_server_that_rate_limits_every_other_request(llm_server, tmp_path):
    llm_server.rule = lambda n: (Fault(status=429, headers={"retry-after": "0"}, message="Rate limit reached")
                                 if n % 2 == 1 else Reply("ok", input_tokens=12, output_tokens=1))
    result = doctor(tmp_path, "--model", "openai/gpt-4o-mini", "--base-url", llm_server.openai_url,
                    OPENAI_API_KEY="test-key")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 retries; retried after: 429 rate limited" in result.stdout
    assert "tokens: 12 input, 1 output" in result.stdout
    assert "cost: $0.000002" in result.stdout  # gpt-4o-mini: 12 * $0.15/M + 1 * $0.60/M = $0.0000024
    assert "cost summary:" in result.stdout
    assert llm_server.count("/chat/completions") == 2


def test_doctor_stops_at_once_on_authentication_failure_with_the_servers_message(llm_server, tmp_path):
    llm_server.rule = lambda n: Fault(status=401, message="Incorrect API key provided: sk-wrong")
    result = doctor(tmp_path, "--model", "openai/gpt-4o-mini", "--base-url", llm_server.openai_url,
                    OPENAI_API_KEY="sk-wrong")
    assert result.returncode == 1
    assert "HTTP 401: Incorrect API key provided: sk-wrong" in result.stderr
    assert llm_server.count() == 1  # the mechanism: a 401 is not retried


def test_doctor_checks_anthropic_through_the_messages_api(llm_server, tmp_path):
    result = doctor(tmp_path, "--model", "anthropic/claude-haiku-4-5", "--base-url", llm_server.url,
                    ANTHROPIC_API_KEY="test-key")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "reply: 'ok'" in result.stdout
    assert llm_server.count("/v1/messages") == 1


def test_doctor_without_a_model_reports_the_machine_and_makes_no_call(llm_server, tmp_path):
    result = doctor(tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"python {sys.version.split()[0]}" in out
    assert "anthropic: not configured (set ANTHROPIC_API_KEY)" in out
    assert "--provider replay [--replay DIR] (default: the bundled demos)" in out
    assert "sandbox:" in out and "model check: skipped" in out
    assert llm_server.count() == 0


def test_doctor_reads_keys_and_base_url_from_dot_env(llm_server, tmp_path):
    (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={llm_server.openai_url}\nexport OPENAI_API_KEY='from-dotenv'\n")
    result = doctor(tmp_path, "--model", "openai/gpt-4o-mini")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "openai: configured (OPENAI_API_KEY set, base URL" in result.stdout
    headers = {k.lower(): v for k, v in llm_server.requests[0]["headers"].items()}
    assert headers["authorization"] == "Bearer from-dotenv"


def test_doctor_with_a_model_but_no_provider_says_how_to_configure_one(tmp_path):
    result = doctor(tmp_path, "--model", "gpt-4o")
    assert result.returncode == 2
    for hint in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "--provider replay [--replay DIR]",
        "examples/replay",
    ):
        assert hint in result.stderr


def test_doctor_runs_offline_from_the_bundled_recording(tmp_path):
    replay = os.path.join(os.path.dirname(__file__), "..", "examples", "replay")
    result = doctor(tmp_path, "--provider", "replay", "--replay", replay)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "model check: replay/replay" in result.stdout and "reply: 'ok'" in result.stdout
    assert "1 call(s) replayed" in result.stdout


def test_doctor_lists_each_sandbox_mechanism_as_enforced_or_not_available(tmp_path):
    from envforge.pipeline.sandbox.inside.syscalls import seccomp_available
    from envforge.pipeline.sandbox.outside.capabilities import capabilities, ladder, runs_as

    out = doctor(tmp_path).stdout
    lines = out[out.index("sandbox:"):out.index("providers:")].splitlines()
    mode = capabilities()["mode"]
    assert lines[1].strip() == f"confinement: {mode}, environment code as {runs_as(mode)}"
    root = os.geteuid() == 0
    assert (" its own uid per worker (200000+), owning no file, no groups" in lines[1]) == (root and mode != "none")
    assert f"uid {os.geteuid()} (yours)" in lines[1] or root, lines[1]
    assert lines[2].strip() == "ladder (strongest first):"
    rungs = {line.strip().split(": ")[0]: line.strip().split(": ")[1].split(" (")[0] for line in lines[3:6]}
    assert rungs == {r.name: "used" if r.name == mode else "available" if r.available else "not available"
                     for r in ladder()}
    states = {line.strip().split(": ")[0]: line.strip().split(": ")[1].split(" (")[0] for line in lines[6:]}
    # one word for each state: a rung "available" is never also a mechanism "not available" (issue 37)
    assert "not available" not in states.values()
    ns = "enforced" if mode in ("namespaces", "userns") else "not enforced"
    seccomp = "enforced" if seccomp_available()[0] else "not enforced"
    assert states == {"namespaces": ns, "chroot": ns, "uid": "enforced" if root and mode != "none" else "not enforced",
                      "landlock": "enforced" if mode == "landlock" else "not enforced", "rlimits": "enforced",
                      "no_new_privs": "enforced" if mode != "none" or seccomp == "enforced" else "not enforced",
                      "disk quota": "enforced", "keyring": seccomp, "seccomp": seccomp, "environment": "enforced",
                      "folder copy": "enforced"}
    if seccomp == "enforced":
        listed = next(line for line in lines if line.strip().startswith("seccomp:"))
        for call in ("keyctl", "ptrace", "mount", "unshare", "setns", "bpf", "init_module", "kexec_load", "reboot",
                     "io_uring_setup", "io_uring_enter"):
            assert call in listed
