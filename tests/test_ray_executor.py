"""`--executor ray` (issue 18): the same records as the local executor, on a local Ray cluster of
two nodes that the test starts itself (loopback only), and resume after the driver is killed."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Read by Ray when it is imported: a cluster of this machine talks over loopback only.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from cli_kit import ENVFORGE, REFERENCE, ROOT, envforge, require_extra  # noqa: E402

require_extra("ray", "ray")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each on this machine, talking over loopback only (their files in a
    private folder: remote.simulated_cluster)."""
    from envforge.pipeline.sandbox.outside.remote import simulated_cluster

    with simulated_cluster(nodes=2) as nodes:
        yield nodes


def episodes(out: Path) -> list[dict]:
    """What an episode's record says about the episode (not where or when it ran)."""
    keep = ("env", "level", "run", "agent", "split", "steps", "total_reward", "normalized", "stop_reason", "solved")
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    return sorted(({k: r.get(k) for k in keep} for r in rows), key=lambda r: (r["env"], r["level"], r["run"]))


EVALUATE = ["evaluate", str(REFERENCE), "--agent", "random", "--runs", "2", "--max-levels", "3"]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """EVALUATE run by the local executor, once for the module's tests: the records Ray's must equal."""
    tmp = tmp_path_factory.mktemp("local")
    done = envforge(*EVALUATE, "--out", "local", cwd=tmp, timeout=900)
    assert done.returncode == 0, done.stderr
    return tmp / "local"


def test_evaluate_on_ray_writes_the_same_episode_records_as_local(cluster, local, tmp_path):
    shutil.copytree(local, tmp_path / "local")
    remote = envforge(*EVALUATE, "--out", "ray", "--executor", "ray", "--ray-address", cluster.address, cwd=tmp_path,
                      timeout=900)
    assert remote.returncode == 0, remote.stderr
    assert len(episodes(tmp_path / "local")) == 2 * 2 * 3
    assert episodes(tmp_path / "ray") == episodes(tmp_path / "local")
    # Each record names the rung its worker ran on: the node's own, reported by its actor.
    from envforge.pipeline.sandbox.outside.capabilities import capabilities

    for where in ("local", "ray"):
        rows = [json.loads(line) for line in (tmp_path / where / "episodes.jsonl").read_text().splitlines()]
        assert {r["confinement"] for r in rows} == {capabilities()["mode"]}, where


def test_a_killed_driver_resumes_on_ray_with_nothing_repeated_or_lost(cluster, local, tmp_path):
    argv = [ENVFORGE, *EVALUATE, "--out", "ray", "--executor", "ray", "--ray-address", cluster.address,
            "--concurrency", "1"]
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"), start_new_session=True)
    records = tmp_path / "ray" / "episodes.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and driver.poll() is None:
        if records.exists() and len(records.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    assert driver.poll() is None, "the run ended before it could be killed"
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    done_before = len([line for line in records.read_text().splitlines() if line.strip()])
    assert 3 <= done_before < 12

    resumed = envforge(*EVALUATE, "--out", "ray", "--resume", "--executor", "ray", "--ray-address", cluster.address,
                       cwd=tmp_path, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done_before} already done" in resumed.stdout
    assert episodes(tmp_path / "ray") == episodes(local)  # nothing repeated, nothing lost


def test_generate_demo_on_ray_accepts_what_local_accepts(cluster, tmp_path, generate_demo):
    # two of the demo's themes: one the local run accepts, one it rejects
    lines = (ROOT / "examples" / "themes.txt").read_text().splitlines()
    themes = tmp_path / "themes.txt"
    themes.write_text(f"{lines[0]}\n{lines[2]}\n")
    local = generate_demo  # the session's one local run of the whole demo (conftest.py)
    remote = envforge("generate", "--themes", str(themes), "--provider", "replay", "--out", "ray",
                      "--executor", "ray", "--ray-address", cluster.address, cwd=tmp_path, timeout=900)
    assert (remote.returncode, local.returncode) == (0, 0), remote.stderr + local.stderr

    def accepted(out: Path) -> list[str]:
        return sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("_"))

    def rejected(out: Path) -> list[str]:
        return sorted(p.name for p in (out / "_rejected").iterdir())

    ran = accepted(tmp_path / "ray") + rejected(tmp_path / "ray")
    assert len(ran) == 2
    assert accepted(tmp_path / "ray") == [n for n in accepted(local.out) if n in ran] != []
    assert rejected(tmp_path / "ray") == [n for n in rejected(local.out) if n in ran] != []


def test_ray_without_the_cluster_is_a_clear_error(tmp_path):
    done = envforge(*EVALUATE, "--out", "x", "--executor", "ray", "--ray-address", "127.0.0.1:9", cwd=tmp_path,
                    timeout=900)
    assert done.returncode == 2
    assert "--executor ray: expected a Ray cluster at 127.0.0.1:9" in done.stderr
    assert not (tmp_path / "x").exists()


SLOW_STEP = '''
import time as _time

_step = CrateDockEnv.step


def _slow_step(self, action):  # slow enough that a node can be lost in the middle of an episode
    _time.sleep(0.3)
    return _step(self, action)


CrateDockEnv.step = _slow_step
'''


def test_an_episode_whose_ray_worker_dies_is_played_again_and_says_so(cluster, tmp_path):
    """A Ray worker process killed mid-episode, as when its node dies (Ray reports both as the actor's
    death; SPREAD does not promise which node an actor lands on, so the test kills the process)."""
    import ray
    from ray._private.state import actors  # the state API needs the dashboard, which this cluster has not

    env = tmp_path / "envs" / "crate_dock"
    shutil.copytree(REFERENCE / "crate_dock", env)
    (env / "env_main.py").write_text((env / "env_main.py").read_text() + SLOW_STEP)
    argv = [ENVFORGE, "evaluate", str(env.parent), "--agent", "random", "--runs", "1", "--max-levels", "3",
            "--concurrency", "3", "--out", "ray", "--executor", "ray", "--ray-address", cluster.address]
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"))
    ray.init(address=cluster.address)
    try:
        deadline, victim = time.monotonic() + 600, None
        while time.monotonic() < deadline and driver.poll() is None and victim is None:
            alive = [a for a in actors(actor_state_name="ALIVE").values()
                     if a["ActorClassName"].endswith("SandboxActor") and a["Pid"]]
            victim = alive[0]["Pid"] if alive else None
            time.sleep(0.2)
        assert driver.poll() is None and victim, "the run ended before its worker could be lost"
        time.sleep(1.0)  # into an episode's steps (each takes 0.3 s)
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = driver.communicate(timeout=900)
    finally:
        ray.shutdown()
    assert driver.returncode == 0, stderr
    assert "Traceback" not in stderr
    rows = [json.loads(line) for line in (tmp_path / "ray" / "episodes.jsonl").read_text().splitlines() if line]
    assert sorted((r["level"], r["run"]) for r in rows) == sorted({(r["level"], r["run"]) for r in rows})
    assert len(rows) == 3 and all(r["stop_reason"] == "max_steps" for r in rows), rows
    retried = [r for r in rows if r["executor_retries"]]
    assert len(retried) == 1, "the episode of the lost worker does not say it was played again"
    assert "was lost during" in retried[0]["executor_retries"][0]


CLUSTER_PROCESSES = r'''
import json, os, sys
from envforge.pipeline.sandbox.outside import executor, remote

with executor.running_on(executor.Executor("ray")):  # as `--executor ray` without an address: a new local cluster
    worker = executor.open_worker(sys.argv[1])  # a sandbox actor, so that a Ray worker process runs too


def children(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                kids.append(int(entry))
    return kids


found, todo = [], children(os.getpid())
while todo:
    pid = todo.pop()
    todo += children(pid)
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        name = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode()
    except OSError:
        continue
    found.append({"pid": pid, "name": os.path.basename(name),
                  "variables": sorted(v.partition(b"=")[0].decode() for v in environ if v),
                  "leaks": [v.decode() for v in environ if b"sk-fake-" in v]})
token = os.environ.get("RAY_AUTH_TOKEN_PATH")
print(json.dumps({"processes": found, "driver_has_key": "OPENAI_API_KEY" in os.environ, "token_path": token,
                  "token": oct(os.stat(token).st_mode & 0o777) if token else None,
                  "token_folder": oct(os.stat(os.path.dirname(token)).st_mode & 0o777) if token else None}))
worker.close()
'''


def test_the_local_cluster_envforge_starts_sees_no_api_key_and_keeps_its_token_private(tmp_path):
    """Issue 21: the processes of the cluster `--executor ray` starts (GCS, raylet, agents, workers)
    get a scrubbed environment; its token file is 0600 in a private folder, removed at exit."""
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=sk-fake-dotenv\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", OPENAI_API_KEY="sk-fake-openai", HF_TOKEN="sk-fake-hf",
               MY_SERVICE_SECRET="sk-fake-secret", RAY_AUTH_TOKEN="sk-fake-ray-token", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CLUSTER_PROCESSES, str(REFERENCE / "crate_dock")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["driver_has_key"]  # the keys stay in the driver
    names = {p["name"] for p in seen["processes"]}
    assert {"gcs_server", "raylet"} <= names, names
    assert any(n.startswith("ray::") for n in names), names  # a Ray worker process (the sandbox actor's)
    assert [p for p in seen["processes"] if p["leaks"]] == []
    assert not any(v.endswith(("_API_KEY", "_TOKEN", "_SECRET")) for p in seen["processes"] for v in p["variables"])
    assert (seen["token"], seen["token_folder"]) == ("0o600", "0o700")
    assert "Token authentication is enabled" not in done.stderr  # envforge set it: no warning to the user
    assert not Path(seen["token_path"]).parent.exists()  # removed when the driver ended
