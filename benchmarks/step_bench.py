"""A step through `envforge serve` and through the Gymnasium adapter beside the same step in process.

    . .venv/bin/activate && python benchmarks/step_bench.py [--steps 2000] [--env DIR] [--no-serve]

One session plays the same fixed sequence of random actions (reset at each episode's end) on the
environment's first level three ways, in one run: in process (the env's own code through the
`EnvHost` a sandbox worker runs: step, render, state hash; the floor), through `envforge.make`
(the Gymnasium adapter: a sandbox worker, the pipes, the checks of every reply) and through
`envforge serve` (a server subprocess; a WebSocket session speaking OpenEnv's messages: reset,
step). Prints steps/s and the median step in µs of each, and how many times slower than in
process each is (the ratio issue 40 asks to keep at most 1.5), with the machine's 1-minute load.

In process means in *this* process: acceptable because this script is not envforge, and the env
is a hand-written reference env (crate_dock by default), never model-written code.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import envforge  # noqa: E402
from envforge.pipeline.envfolder.spec import EnvSpec  # noqa: E402

REFERENCE = ROOT / "generated_envs" / "reference" / "crate_dock"


def plan(env: Path, steps: int) -> list[dict]:
    rng = random.Random(0)
    space = EnvSpec.open(env).actions
    return [space.sample(rng) for _ in range(steps)]


def timed(reset, step, actions: list[dict]) -> list[float]:
    """Seconds of each step of `actions`; `step(action)` says whether the episode ended."""
    times = []
    reset()
    for action in actions:
        started = time.perf_counter()
        done = step(action)
        times.append(time.perf_counter() - started)
        if done:
            reset()
    return times


def in_process(env: Path, level: str, actions: list[dict]) -> list[float]:
    from envforge.pipeline.sandbox.inside import host

    scratch = Path(tempfile.mkdtemp(prefix="envforge-bench-"))
    copy = scratch / "env"
    shutil.copytree(env, copy, ignore=shutil.ignore_patterns("__pycache__"))
    cwd = os.getcwd()
    os.chdir(copy)  # where a worker runs its env
    try:
        env_host = host.EnvHost(str(copy))

        def call(op: str, **args) -> dict:
            reply = env_host.handle({"op": op, "args": args})
            if not reply["ok"]:
                raise RuntimeError(reply)
            return reply["result"]

        call("load")
        steps = [0]
        cap = EnvSpec.open(env).max_steps

        def reset() -> None:
            call("reset", level=level, seed=0)
            steps[0] = 0

        def step(action: dict) -> bool:
            out = call("step", action=action)
            steps[0] += 1
            return out["terminated"] or out["capped"] or steps[0] >= cap

        return timed(reset, step, actions)
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)


def gym(env: Path, level: str, actions: list[dict]) -> list[float]:
    adapter = envforge.make(env, level=Path(level).stem)
    try:
        def step(action: dict) -> bool:
            _, _, terminated, truncated, _ = adapter.step(action)
            return terminated or truncated

        return timed(lambda: adapter.reset(seed=0), step, actions)
    finally:
        adapter.close()


def serve(env: Path, level: str, actions: list[dict]) -> list[float]:
    from websockets.sync.client import connect

    proc = subprocess.Popen([sys.executable, "-m", "envforge", "serve", str(env), "--port", "0",
                             "--idle-seconds", "600"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C stops" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait(600)
        found = re.search(r"at (http://127\.0\.0\.1:\d+/\S+)", "".join(lines))
        if not found:
            raise RuntimeError(f"envforge serve did not say where it serves: {''.join(lines)[-500:]}")
        url = found.group(1).replace("http://", "ws://") + "/ws"
        with connect(url, open_timeout=120, max_size=None) as ws:
            def send(message: dict) -> dict:
                ws.send(json.dumps(message))
                reply = json.loads(ws.recv())
                if reply.get("type") == "error":
                    raise RuntimeError(reply)
                return reply["data"]

            def step(action: dict) -> bool:
                return bool(send({"type": "step", "data": action})["done"])

            return timed(lambda: send({"type": "reset", "data": {"level": Path(level).stem}}), step, actions)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps of each way (default 2000)")
    parser.add_argument("--env", type=Path, default=REFERENCE, help="environment folder (default crate_dock)")
    parser.add_argument("--no-serve", action="store_true", help="leave out envforge serve (it needs the openenv extra)")
    args = parser.parse_args()
    env = args.env.resolve()
    level = str(EnvSpec.open(env).levels("test")[0])
    actions = plan(env, args.steps)
    print(f"{env.name}, {level}, {args.steps} steps each, one session, {os.cpu_count()} CPU(s)")
    print(f"{'way':<26}{'steps/s':>9}{'p50 µs':>9}{'× in process':>14}{'load':>6}")
    floor = None
    ways = [("in process (EnvHost)", in_process), ("envforge.make (Gym)", gym)]
    if not args.no_serve:
        ways.append(("envforge serve (OpenEnv)", serve))
    for name, way in ways:
        times = way(env, level, actions)
        rate = len(times) / sum(times)
        floor = floor or rate
        print(f"{name:<26}{rate:>9.0f}{statistics.median(times) * 1e6:>9.0f}{floor / rate:>14.2f}"
              f"{os.getloadavg()[0]:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
