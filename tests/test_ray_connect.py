"""Joining a Ray cluster (`--ray-address`): a refused connection names token authentication and
what to set (issue 23; Ray 2.60's `ray start` turns it on only with RAY_AUTH_MODE=token or a token
already on the head, and Ray sends no token to an address given explicitly unless RAY_AUTH_MODE=token),
and the README's steps work as written (issue 35)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cli_kit import require_extra

require_extra("ray", "ray")

from envforge.pipeline.cli import main  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[1] / "generated_envs" / "reference"


@pytest.fixture
def listening():
    """Something listening where the cluster is said to be (so the connection is tried)."""
    server = socket.create_server(("127.0.0.1", 0))
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.mark.parametrize("refusal", ["gcs_timeout", "authentication"])
def test_a_refused_connection_names_token_authentication_and_what_to_set(refusal, listening, monkeypatch,
                                                                         tmp_path, capsys):
    import ray

    def refuse(**kwargs):
        raise {"gcs_timeout": ConnectionError("Failed to connect to GCS within 60 seconds. GCS may have been killed."),
               "authentication": ray.exceptions.AuthenticationError(
                   "RPC error: InvalidAuthToken: Authentication token is missing or incorrect")}[refusal]

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(ray, "init", refuse)
    code = main(["evaluate", str(REFERENCE), "--agent", "random", "--out", str(tmp_path / "out"),
                 "--executor", "ray", "--ray-address", listening])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err  # one line, not Ray's help text again
    line = err[0]
    assert line.startswith(f"envforge evaluate: error: --executor ray: expected a Ray cluster at {listening}, found: ")
    assert "token authentication" in line and "set RAY_AUTH_MODE=token" in line
    assert "ray get-auth-token" in line and "RAY_AUTH_TOKEN_PATH" in line
    assert not (tmp_path / "out").exists()


def test_with_token_mode_on_the_refusal_says_to_check_the_token(listening, monkeypatch, tmp_path, capsys):
    import ray

    def refuse(**kwargs):
        raise ray.exceptions.AuthenticationError("RPC error: InvalidAuthToken: Authentication token is missing")

    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(ray, "init", refuse)
    code = main(["evaluate", str(REFERENCE), "--agent", "random", "--out", str(tmp_path / "out"),
                 "--executor", "ray", "--ray-address", listening])
    assert code == 2
    assert "check that this machine has the cluster's token" in capsys.readouterr().err


def test_a_local_cluster_that_does_not_start_is_one_line_and_leaves_no_folder(monkeypatch, tmp_path, capsys):
    """Ray raises a bare Exception for a node that does not start in time (seen for a normal user:
    a raw traceback after 60 s, a /tmp/envforge-ray-* folder left behind)."""
    import ray

    from envforge.pipeline.sandbox.outside import remote

    def times_out(**kwargs):
        os.makedirs(os.path.join(kwargs["_temp_dir"], "session_x", "sockets"))  # what Ray had made by then
        raise Exception("The current node timed out during startup. This could happen because some of the raylet "
                        "failed to startup or the GCS has become overloaded.")

    def ours() -> list[str]:
        return [p for p in os.listdir(remote.LOCAL_CLUSTER_WHERE or tempfile.gettempdir())
                if p.startswith(f"{remote.LOCAL_CLUSTER_PREFIX}{os.getpid()}-")]

    monkeypatch.delenv(remote.ADDRESS_VARIABLE, raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", times_out)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    before = dict(os.environ)
    code = main(["evaluate", str(REFERENCE), "--agent", "random", "--out", str(tmp_path / "out"), "--executor", "ray"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["envforge evaluate: error: --executor ray: expected a new local Ray cluster, found: The current "
                   "node timed out during startup. This could happen because some of the raylet failed to startup "
                   "or the GCS has become overloaded."]
    assert ours() == []
    # the scrubbed environment was only Ray's while it started; no token of a cluster that is not there
    after = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}  # read at Ray's import
    assert after == {k: v for k, v in before.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}


def _head(home: Path, port: int, ray_tmp: str, **env: str) -> subprocess.Popen:
    """`ray start --head` on this machine (loopback), as the README says, under `home`."""
    ray_cli = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--num-cpus", "1", f"--port={port}",
                             "--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir={ray_tmp}"],
                            env=_environment(home, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 600  # how long a busy machine may take to start a node, not a bound tested
    while head.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return head
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the Ray head did not start")


def _environment(home: Path, **env: str) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return {**kept, "HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", **env}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("auth", ["token", "off"])
def test_the_readme_s_ray_steps_work_as_written(auth, tmp_path):
    """README, "More than one machine": with token authentication, `ray get-auth-token --generate`
    and `RAY_AUTH_MODE=token ray start --head` on the head, the token and RAY_AUTH_MODE=token on the
    driver; without, a plain `ray start --head`. A driver without the token is refused in one line."""
    from envforge.pipeline.testing.tiny_env import write_env

    head_home, driver_home, stranger = tmp_path / "head", tmp_path / "driver", tmp_path / "stranger"
    for home in (head_home, driver_home, stranger):
        home.mkdir()
    mode = {}
    if auth == "token":
        made = subprocess.run([str(Path(sys.executable).parent / "ray"), "get-auth-token", "--generate"],
                              env=_environment(head_home), capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        assert token and (head_home / ".ray" / "auth_token").read_text().strip() == token
        (driver_home / ".ray").mkdir()
        (driver_home / ".ray" / "auth_token").write_text(token)
        (driver_home / ".ray" / "auth_token").chmod(0o600)
        mode = {"RAY_AUTH_MODE": "token"}
    port, ray_tmp = _free_port(), tempfile.mkdtemp(prefix="envforge-ray-test-")  # short: socket paths
    head = _head(head_home, port, ray_tmp, **mode)
    try:
        corridor = write_env(tmp_path / "corridor")

        def evaluate(home: Path, out: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "envforge", "evaluate", str(corridor), "--agent", "random",
                                   "--runs", "1", "--max-levels", "1", "--executor", "ray", "--ray-address",
                                   f"127.0.0.1:{port}", "--out", str(tmp_path / out)],
                                  env=_environment(home, **env), capture_output=True, text=True, timeout=900)

        played = evaluate(driver_home, "played", **mode)
        assert played.returncode == 0, played.stdout + played.stderr
        assert (tmp_path / "played" / "episodes.jsonl").read_text().strip()
        if auth == "token":
            refused = evaluate(stranger, "refused")  # no RAY_AUTH_MODE, no token
            err = refused.stderr.strip().splitlines()
            assert refused.returncode == 2 and len(err) == 1, refused.stderr
            assert f"expected a Ray cluster at 127.0.0.1:{port}, found: " in err[0]
            assert "InvalidAuthToken" in err[0] and "set RAY_AUTH_MODE=token" in err[0]
            tokenless = evaluate(stranger, "tokenless", RAY_AUTH_MODE="token")  # the mode, no token
            assert tokenless.returncode == 2, tokenless.stderr
            assert "no authentication token was found" in tokenless.stderr
            assert "check that this machine has the cluster's token" in tokenless.stderr
    finally:
        os.killpg(head.pid, 9)
        head.wait()
        shutil.rmtree(ray_tmp, ignore_errors=True)
