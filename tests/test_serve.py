"""`envforge serve`: environments as an OpenEnv server, driven by OpenEnv's own client and validator.

One server (a subprocess, on a free loopback port) of both reference environments for the module:
two concurrent sessions through whole episodes, hostile clients, sessions at capacity, slow clients;
a second one serving crate_dock alone for `openenv validate` (an environment served at / as well).
Workers are counted as the server's descendant processes.
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
REFERENCE = ROOT / "generated_envs" / "reference"
CRATE = REFERENCE / "crate_dock"
MAX_SESSIONS = 3
IDLE_SECONDS = 10  # long enough for a loaded machine to open the sessions a test holds at once
REQUEST_SECONDS = 3
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


def start_server(env_dir: Path, *flags: str):
    """`envforge serve ENV_DIR --port 0 FLAGS` as a subprocess; returns it and the lines it prints."""
    proc = subprocess.Popen([sys.executable, "-m", "envforge", "serve", str(env_dir), "--port", "0", *flags],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []

    def read():
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def ready(proc, lines: list[str]) -> int:
    """The port the server announced once it listens."""
    # Importing OpenEnv (FastAPI, Gradio, FastMCP) takes a minute on a loaded machine.
    wait_for(lambda: any("Ctrl-C stops" in l for l in lines) or proc.poll() is not None, "the server's ready line", 600)
    text = "".join(lines)
    match = re.search(r"crate_dock at http://127\.0\.0\.1:(\d+)/crate_dock", text)
    assert match, text
    assert "loopback only" in text, text
    return int(match.group(1))


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def servers():
    """Both servers, started together (each spends its start importing OpenEnv)."""
    both = start_server(REFERENCE, "--max-sessions", str(MAX_SESSIONS), "--idle-seconds", str(IDLE_SECONDS),
                        "--max-message-kb", "16", "--request-seconds", str(REQUEST_SECONDS))
    alone = start_server(CRATE)
    try:
        yield both, alone
    finally:
        stop(both[0])
        stop(alone[0])


@pytest.fixture(scope="module")
def server(servers):
    (proc, lines), _ = servers
    port = ready(proc, lines)
    assert f"tide_pool at http://127.0.0.1:{port}/tide_pool" in "".join(lines)
    return {"url": f"http://127.0.0.1:{port}/crate_dock", "base": f"http://127.0.0.1:{port}", "port": port,
            "pid": proc.pid, "lines": lines, "proc": proc}


@pytest.fixture(scope="module")
def single(servers):
    _, (proc, lines) = servers
    return f"http://127.0.0.1:{ready(proc, lines)}"


def client(server, name: str = "crate_dock"):
    """OpenEnv's own client (imported here: see cli_kit.require_extra)."""
    from openenv.core import GenericEnvClient

    return GenericEnvClient(base_url=f"{server['base']}/{name}", message_timeout_s=300).sync()


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
        extra.send(json.dumps({"type": "reset", "data": {}}))  # read the refusal: the server closes, saying why
        with pytest.raises(ConnectionClosed) as closed:
            extra.recv(timeout=120)
    assert refused["data"]["code"] == "CAPACITY_REACHED" and refused["data"]["max_sessions"] == MAX_SESSIONS
    assert closed.value.rcvd.code == 1013 and "CAPACITY_REACHED" in closed.value.rcvd.reason
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

    # And the server still serves.
    with client(server) as env:
        assert env.reset(level="level_03").done is False
        assert env.step({"action": "move", "params": {"direction": "east"}}).observation["step"] == 1
    wait_for(lambda: not descendants(pid), "no worker left")
    assert server["proc"].poll() is None
    assert "Traceback" not in "".join(server["lines"])  # a vanished client ends its session quietly


def openenv_validate(url: str, process: bool = False) -> dict:
    """OpenEnv's own validator against a running server: `openenv validate URL`, which prints a JSON
    report, as a command (`process`) or through its command-line app in this process (its import is
    the cost: a few CPU-seconds each)."""
    if process:
        done = subprocess.run([str(Path(sys.executable).parent / "openenv"), "validate", url, "--timeout", "60"],
                              capture_output=True, text=True, timeout=600)
        code, out = done.returncode, done.stdout
    else:
        from openenv.cli.__main__ import app
        from typer.testing import CliRunner

        done = CliRunner().invoke(app, ["validate", url, "--timeout", "60"])
        code, out = done.exit_code, done.stdout
    report = json.loads(out)
    assert code == 0, json.dumps(report["criteria"], indent=1)
    return report


CRITERIA = {"openapi_version_available", "health_endpoint", "metadata_endpoint", "schema_endpoint", "mcp_endpoint",
            "mode_endpoint_consistency"}


def test_openenv_validate_passes_every_check_for_one_and_several_environments(server, single):
    for url, process in ((f"{server['base']}/tide_pool", True), (f"{server['base']}/crate_dock", False),
                         (f"{single}/crate_dock", False), (single, False)):
        report = openenv_validate(url, process)
        assert report["passed"] is True and report["mode"] == "production", report
        assert {c["id"] for c in report["criteria"] if c["passed"]} == CRITERIA, report["criteria"]
    # Each environment's OpenAPI document is its own, and /mcp answers JSON-RPC saying what it serves.
    paths = json.loads(urllib.request.urlopen(f"{server['base']}/tide_pool/openapi.json", timeout=60).read())["paths"]
    assert "/schema" in paths and "/mcp" in paths and not {"/reset", "/step", "/state"} & set(paths)
    call = urllib.request.Request(f"{server['base']}/tide_pool/mcp", method="POST", headers={"content-type":
                                  "application/json"}, data=json.dumps({"jsonrpc": "2.0", "id": 7,
                                                                        "method": "tools/list"}).encode())
    answer = json.loads(urllib.request.urlopen(call, timeout=60).read())
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 7 and answer["error"]["code"] == -32601
    assert "/tide_pool/ws" in answer["error"]["message"]
    assert not descendants(server["pid"])  # validating starts no worker


def test_a_session_beyond_max_sessions_is_refused_and_a_closed_slot_is_free_at_once(server):
    held = [client(server, name) for name in ("crate_dock", "tide_pool", "crate_dock")]
    for env in held:
        env.connect()
        env.reset()
    for env in held:  # a message: none of them idles out while the next one is refused
        env.state()
    with client(server, "tide_pool") as extra, pytest.raises(RuntimeError) as refused:  # capacity is over both
        extra.reset()
    assert "(code: CAPACITY_REACHED)" in str(refused.value) and f"--max-sessions {MAX_SESSIONS}" in str(refused.value)
    # A trainer closing a session at capacity and opening the next one at once: admitted, every time.
    for round in range(4):
        held.pop(0).close()
        fresh = client(server, ("tide_pool", "crate_dock")[round % 2])
        fresh.connect()
        assert fresh.reset().done is False
        held.append(fresh)
        assert all(env.state()["level"] for env in held)  # the others go on
    for env in held:
        env.close()
    wait_for(lambda: not descendants(server["pid"]), "every worker gone after the sessions closed")


def test_an_idle_session_is_closed_and_its_client_is_told_why(server):
    with client(server) as idle:
        idle.reset(level="level_01")
        assert descendants(server["pid"])
        wait_for(lambda: not descendants(server["pid"]), "the idle session's worker gone")
        with pytest.raises(ConnectionClosed) as closed:
            idle.step({"text": "move north"})
    assert closed.value.rcvd.code == 4408
    assert f"session closed after {IDLE_SECONDS}s without a message (--idle-seconds)" in str(closed.value)


def read_to_end(sock: socket.socket) -> bytes:
    """What the server sent before it closed `sock` (the bound only keeps a broken server from hanging)."""
    sock.settimeout(60)
    data = b""
    with contextlib.suppress(ConnectionError):
        while chunk := sock.recv(4096):
            data += chunk
    return data


def test_slow_clients_do_not_keep_a_legitimate_client_from_being_served(server):
    port = server["port"]
    silent = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(30)]
    dribbling = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(30)]
    head = b"GET /crate_dock/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    stop_dribbling = threading.Event()

    def dribble():  # a byte at a time to each, never a whole head
        for k in range(len(head)):
            for sock in dribbling:
                with contextlib.suppress(OSError):
                    sock.send(head[k:k + 1])
            if stop_dribbling.wait(0.2):
                return

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    late_body = socket.socket()
    try:
        time.sleep(0.5)
        # Legitimate clients: a health check, a request whose body never comes, a whole session.
        health = urllib.request.urlopen(f"{server['url']}/health", timeout=60)
        assert health.status == 200 and json.loads(health.read())["status"] == "healthy"
        late_body.settimeout(60)
        late_body.connect(("127.0.0.1", port))
        late_body.sendall(b"POST /crate_dock/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                          b"content-length: 50\r\n\r\n{")
        with client(server) as env:
            assert env.reset(level="level_01").done is False
            assert env.step({"text": "move east"}).observation["step"] == 1
        answers = [read_to_end(sock).split(b"\r\n", 1)[0] for sock in silent + dribbling]
        body_answer = read_to_end(late_body)
    finally:
        stop_dribbling.set()
        dribbler.join(60)
        for sock in silent + dribbling + [late_body]:
            sock.close()
    # Every slow client was closed by the server: made room for a newer connection (503), or its head
    # ran out of time (408), the dribbling ones too: the deadline is the head's, not a byte's.
    assert set(answers) <= {b"HTTP/1.1 503 Service Unavailable", b"HTTP/1.1 408 Request Timeout"}, set(answers)
    assert len(answers) == 60 and b"HTTP/1.1 503 Service Unavailable" in answers
    assert b"HTTP/1.1 408 Request Timeout" in answers[30:]
    assert body_answer.startswith(b"HTTP/1.1 408 ")
    assert f"expected the request's body within {REQUEST_SECONDS}s of its head".encode() in body_answer
    wait_for(lambda: not descendants(server["pid"]), "the session's worker gone")
    assert server["proc"].poll() is None
