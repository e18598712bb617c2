"""`envforge serve`: environments as an OpenEnv server, driven by OpenEnv's own client.

One server (a subprocess, on a free loopback port) for the module: two concurrent sessions through
whole episodes, then hostile clients. Workers are counted as the server's descendant processes.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cli_kit import require_extra

require_extra("openenv", "openenv")

from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

import envforge  # noqa: E402
from envforge.pipeline import planner  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CRATE = ROOT / "generated_envs" / "reference" / "crate_dock"
MAX_SESSIONS = 3
IDLE_SECONDS = 3
pytestmark = pytest.mark.slow


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (the server's sandbox workers and their helpers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def wait_for(predicate, what: str, limit: float = 120.0):
    """Polls until `predicate()` holds; the limit only keeps a broken server from hanging the run."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"expected {what}, found it still not so after {limit:g}s")


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen(
        [sys.executable, "-m", "envforge", "serve", str(CRATE), "--port", "0", "--max-sessions", str(MAX_SESSIONS),
         "--idle-seconds", str(IDLE_SECONDS), "--max-message-kb", "16"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []

    def read():
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        # Importing OpenEnv (FastAPI, Gradio, FastMCP) takes a minute on a loaded machine.
        wait_for(
            lambda: any("Ctrl-C stops" in l for l in lines) or proc.poll() is not None, "the server's ready line", 600
        )
        text = "".join(lines)
        match = re.search(r"crate_dock at http://127\.0\.0\.1:(\d+)/crate_dock", text)
        assert match, text
        assert "loopback only" in text, text
        port = int(match.group(1))
        yield {
            "url": f"http://127.0.0.1:{port}/crate_dock",
            "port": port,
            "pid": proc.pid,
            "lines": lines,
            "proc": proc,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def client(server):
    """OpenEnv's own client (imported here: see cli_kit.require_extra)."""
    from openenv.core import GenericEnvClient

    return GenericEnvClient(base_url=server["url"], message_timeout_s=300).sync()


def planner_witness(level: str) -> list[dict]:
    """The planner's winning action sequence on `level` (its search, run in a sandbox worker)."""
    env = envforge.open(CRATE)
    with env.session() as s:
        s.reset(level)
        found = s.client.search(planner.candidates(env.spec.actions, s.client), max_nodes=50_000, time_in_key=False,
                                order="best", stop_at=1.0)
    assert found.best_reward == pytest.approx(1.0), found
    return found.witness


def test_two_concurrent_sessions_play_whole_episodes(server):
    witness = planner_witness("level_01")
    results: dict[str, object] = {}
    both_open = threading.Barrier(3)

    def solved_session():
        with client(server) as env:
            first = env.reset(level="level_01")
            assert first.done is False and "Step 0/30" in first.observation["text"]
            both_open.wait(600)  # both sessions hold a worker here
            both_open.wait(600)
            rewards, last = [], None
            for action in witness:
                last = env.step(action)
                rewards.append(last.reward)
            results["solved"] = (rewards, last, env.state())

    def cut_session():
        with client(server) as env:
            env.reset(level="level_02")
            both_open.wait(600)
            both_open.wait(600)
            steps = []
            while not steps or not steps[-1].done:
                steps.append(env.step({"text": "move north"}))
            results["cut"] = (steps, env.state())

    threads = [threading.Thread(target=solved_session), threading.Thread(target=cut_session)]
    for t in threads:
        t.start()
    both_open.wait(600)
    assert len(descendants(server["pid"])) >= 2  # two sessions, two sandbox workers
    workers_while_open = descendants(server["pid"])
    both_open.wait(600)
    for t in threads:
        t.join(600)
    assert set(results) == {"solved", "cut"}

    rewards, last, state = results["solved"]
    assert sum(rewards) == pytest.approx(1.0) and last.done is True
    assert last.metadata["terminated"] is True and last.metadata["truncated"] is False
    assert last.metadata["solved"] is True and last.metadata["normalized"] == 1.0
    assert state["step_count"] == len(witness) and state["level"] == "levels/level_01.yaml" and state["episode_id"]

    steps, state = results["cut"]
    assert len(steps) == 30 and all(not s.done for s in steps[:-1])  # config.yaml: termination.max_steps 30
    assert steps[-1].done is True and steps[-1].metadata["truncated"] is True
    assert steps[-1].metadata["terminated"] is False and steps[-1].metadata["solved"] is False
    assert state["step_count"] == 30 and state["level"] == "levels/level_02.yaml"
    assert steps[-1].observation["total_reward"] == sum(s.reward for s in steps)

    # Each session's worker is gone once its client closed.
    wait_for(lambda: not (descendants(server["pid"]) & workers_while_open), "the sessions' workers gone")


def test_reset_by_seed_and_a_finished_episode(server):
    with client(server) as env:
        first = env.reset(seed=7)
        assert first.observation["level"] == "seed:7" and first.metadata["max_reward"] is None
        again = env.reset(seed=7)
        assert again.observation["text"] == first.observation["text"]  # same seed, same level
        state = env.state()
        assert state["level"] == "seed:7" and state["step_count"] == 0


def ws_send(ws, message) -> dict:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=300))


def test_hostile_clients_leave_the_server_serving_and_no_worker(server):
    url = server["url"]
    ws_url = url.replace("http://", "ws://") + "/ws"
    pid = server["pid"]

    # Malformed actions and resets: each an error reply, the session goes on.
    with connect(ws_url, open_timeout=120, max_size=None) as ws:
        assert ws_send(ws, "not json")["data"]["code"] == "INVALID_JSON"
        before = ws_send(ws, {"type": "step", "data": {"action": "move", "params": {"direction": "north"}}})
        assert before["type"] == "error" and "step before reset" in before["data"]["message"]
        assert ws_send(ws, {"type": "reset", "data": {"level": "no_such_level"}})["type"] == "error"
        assert "seed" in ws_send(ws, {"type": "reset", "data": {"seed": -1}})["data"]["message"]
        assert ws_send(ws, {"type": "reset", "data": {"level": "level_01"}})["type"] == "observation"
        bad_name = ws_send(ws, {"type": "step", "data": {"action": "fly", "params": {}}})
        assert bad_name["data"]["code"] == "VALIDATION_ERROR"
        bad_text = ws_send(ws, {"type": "step", "data": {"text": 'move "north'}})
        assert bad_text["type"] == "error" and "expected an action" in bad_text["data"]["message"]
        both = ws_send(ws, {"type": "step", "data": {"action": "move", "text": "move north"}})
        assert both["data"]["code"] == "VALIDATION_ERROR"
        ok = ws_send(ws, {"type": "step", "data": {"action": "move", "params": {"direction": "north"}}})
        assert ok["type"] == "observation" and ok["data"]["observation"]["step"] == 1

    # A request larger than the bound: the WebSocket is closed, the HTTP body refused (413).
    with connect(ws_url, open_timeout=120, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"level": "x" * 100_000}}))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=120)
    request = urllib.request.Request(url + "/reset", data=b"{" + b" " * 200_000 + b"}", method="POST",
                                     headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=120)
    assert refused.value.code == 413
    with pytest.raises(urllib.error.HTTPError) as stateless:
        urllib.request.urlopen(urllib.request.Request(url + "/reset", data=b"{}", method="POST"), timeout=120)
    assert stateless.value.code == 409 and "/crate_dock/ws" in stateless.value.read().decode()

    # More sessions than --max-sessions: the extra one is refused, the others play on.
    held = [client(server) for _ in range(MAX_SESSIONS)]
    for env in held:
        env.reset(level="level_01")
    with connect(ws_url, open_timeout=120, max_size=None) as extra:  # the server speaks first: refused
        refused = json.loads(extra.recv(timeout=300))
    assert refused["data"]["code"] == "CAPACITY_REACHED" and refused["data"]["max_sessions"] == MAX_SESSIONS
    assert held[0].step({"text": "move south"}).observation["step"] == 1
    for env in held:
        env.close()
    wait_for(lambda: not descendants(pid), "every worker gone after the sessions closed")

    # A client that vanishes mid-episode (its socket dropped, no close message): its worker goes.
    with contextlib.suppress(ConnectionClosed), connect(ws_url, open_timeout=120, max_size=None) as ws:
        reply = ws_send(ws, {"type": "reset", "data": {"level": "level_01"}})
        playing = descendants(pid)
        ws.socket.shutdown(socket.SHUT_RDWR)
        ws.socket.close()
    assert reply["type"] == "observation" and playing
    wait_for(lambda: not descendants(pid), "the vanished client's worker gone")

    # A client that stays connected but idles past --idle-seconds: its session and worker are closed.
    with client(server) as idle:
        idle.reset(level="level_01")
        assert descendants(pid)
        wait_for(lambda: not descendants(pid), "the idle session's worker gone")

    # And the server still serves.
    with client(server) as env:
        assert env.reset(level="level_03").done is False
        assert env.step({"action": "move", "params": {"direction": "east"}}).observation["step"] == 1
    wait_for(lambda: not descendants(pid), "no worker left")
    assert server["proc"].poll() is None
    assert "Traceback" not in "".join(server["lines"])  # a vanished client ends its session quietly
