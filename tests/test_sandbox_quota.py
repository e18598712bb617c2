"""A disk quota on every rung (issue 34, item 3): a worker that writes more than SandboxLimits.disk_mb
(or makes more than disk_inodes files and folders) into its folder and tmp is ended, and the call
fails as "disk_quota" — a failure of the environment, like running out of memory — on the namespaced
rungs (a tmpfs the kernel bounds, watched by the host) and on the landlock rung (ordinary folders,
watched by the host alone). Each rung is picked with ENVFORGE_CONFINEMENT, in this test's process:
as root in CI, as a normal user in the quick suite (the rungs that user has)."""
from __future__ import annotations

import json
import time

import pytest
from cli_kit import envforge
from sandbox_kit import LEVEL, STEP, Host, RecordingWorker, assert_nothing_left

from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits, Worker
from envforge.pipeline.sandbox.outside import capabilities
from envforge.pipeline.sandbox.outside.capabilities import ladder

AVAILABLE = {r.name: r for r in ladder()}
RUNGS = ("namespaces", "userns", "landlock")
LIMITS = SandboxLimits(call_seconds=120, disk_mb=16, disk_inodes=1000)
QUOTA = "past its disk quota of 16 MB and 1000 files and folders"


def _on(rung: str, monkeypatch) -> None:
    """Workers of this test get `rung`; the rungs this process's workers used (what its records say
    they ran under: capabilities.ran_under) are as they were after it."""
    if not AVAILABLE[rung].available:
        pytest.skip(f"{rung} not available here: {AVAILABLE[rung].detail}")
    monkeypatch.setenv("ENVFORGE_CONFINEMENT", rung)
    monkeypatch.setattr(capabilities, "_used", {})


@pytest.mark.parametrize("what", ["bytes", "inodes"])
@pytest.mark.parametrize("rung", RUNGS)
def test_an_env_writing_many_small_files_past_its_quota_is_ended_as_disk_quota(host: Host, monkeypatch, rung, what):
    _on(rung, monkeypatch)
    worker = RecordingWorker(host.env("many_small_files", what=what), LIMITS)
    assert worker.confinement == rung
    worker.call("reset", level=LEVEL)
    with pytest.raises(SandboxFailure) as caught:
        worker.call("step", action=STEP)
    assert caught.value.kind == "disk_quota", caught.value
    assert caught.value.detail.endswith(QUOTA) and caught.value.op == "step", caught.value.detail
    assert not worker.alive
    pids = worker.pids()
    worker.close()
    assert_nothing_left(worker, pids)
    with Worker(host.env("deep_chain"), LIMITS) as clean:  # a clean disk for the next one
        assert clean.call("reset", level=LEVEL)["t"] == 0


@pytest.mark.parametrize("rung", RUNGS)
def test_an_env_writing_between_calls_is_ended_by_the_watch_and_the_next_call_says_why(host: Host, monkeypatch,
                                                                                        rung):
    _on(rung, monkeypatch)
    with Worker(host.env("write_between_calls"), LIMITS) as worker:
        worker.call("reset", level=LEVEL)
        worker.call("step", action=STEP)  # arms the timer and returns: nothing is past the quota yet
        for _ in range(600):  # while no call runs, the watch ends it (a safety stop of 60 s, not a bound)
            if not worker.alive:
                break
            time.sleep(0.1)
        assert not worker.alive, "the worker outlived its quota between calls"
        with pytest.raises(SandboxFailure) as caught:
            worker.call("observe")
    assert (caught.value.kind, caught.value.op) == ("disk_quota", "observe"), caught.value
    assert caught.value.detail.endswith(QUOTA), caught.value.detail


def test_a_quota_failure_counts_against_the_env_in_evaluate_and_is_no_infrastructure_fault(host: Host, tmp_path):
    env = host.env("many_small_files")
    out = tmp_path / "out"
    done = envforge("evaluate", str(env), "--agent", "random", "--runs", "1", "--out", str(out))
    # Exit 1, as for any episode the environment failed; a verdict on it, not "infrastructure failure".
    assert done.returncode == 1, done.stdout + done.stderr
    assert "infrastructure" not in done.stdout + done.stderr
    assert "1 episode(s) ended because the environment failed (env_error, left out of the scores); e.g. " \
           "many_small_files on levels/level_01.yaml: disk_quota: wrote " in done.stderr, done.stderr
    rows = [json.loads(line) for line in next(out.rglob("episodes.jsonl")).read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["stop_reason"] == "env_error", rows
    assert "disk_quota" in json.dumps(rows[0]), rows[0]


@pytest.mark.parametrize("rung", RUNGS)
def test_a_pooled_worker_ended_while_idle_fails_the_next_lease_as_disk_quota(host: Host, monkeypatch, rung):
    from envforge.pipeline.sandbox.outside.pool import WorkerPool

    _on(rung, monkeypatch)
    env = host.env("write_between_calls")
    with WorkerPool(size=1, limits=LIMITS) as pool:
        with pool.lease(env) as worker:
            worker.call("reset", level=LEVEL)
            worker.call("step", action=STEP)  # healthy: it goes back to the pool, its timer armed
        for _ in range(600):  # a safety stop of 60 s, not a bound
            if not worker.alive:
                break
            time.sleep(0.1)
        assert not worker.alive, "the idle worker outlived its quota"
        with pytest.raises(SandboxFailure) as caught:
            with pool.lease(env):
                pass
    assert (caught.value.kind, caught.value.op) == ("disk_quota", "lease"), caught.value
    assert pool.started == 1 and pool.reused == 0
