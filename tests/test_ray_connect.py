"""Joining a Ray cluster (`--ray-address`): a refused connection names token authentication and
what to set (issue 23: with Ray 2.60 `ray start` turns it on, and Ray sends no token to an address
given explicitly unless RAY_AUTH_MODE=token)."""
from __future__ import annotations

import socket
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
    assert "check that the token here is the cluster's" in capsys.readouterr().err
