"""Evaluation throughput: episodes per second at a simulated model latency, for several concurrencies.

    . .venv/bin/activate && python benchmarks/evaluate_bench.py [--latency 0.2] [--steps 10]

The react agent plays crate_dock through the whole product path (the evaluate runner, the LLM
client and the real OpenAI SDK over HTTP, a pool of sandbox workers), against the loopback model
server of the tests (pipeline/testing/llm_server.py), which answers every call after `--latency` seconds
with a valid action. The server runs in a child process, as a model's server would be elsewhere:
in this process its threads would compete with envforge's for the interpreter lock. Every episode is exactly
`--steps` turns (early-stop limits off), so the
ideal time of E episodes at concurrency C is ceil(E / C) * steps * latency. Each concurrency
runs two rounds on one worker pool: "cold" starts its C sandbox workers inside the measured time
(about 0.2 s of CPU each, so 32 at once saturate 2 cores for a while); "warm" reuses them, as a
long evaluation or the learning loop does. The response cache is off.

The loopback server writes a response's headers and body in two sends; with Nagle's algorithm
on, the client's delayed ACK holds the body back ~40 ms per call, which is the test server's
artefact, not a model's latency. The benchmark turns Nagle off on the server's sockets.
"""
from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from envforge.pipeline.api.evaluate import find_targets  # noqa: E402
from envforge.pipeline.evaluate import Limits, ModelOptions, make_player  # noqa: E402
from envforge.pipeline.evaluate.records import Records  # noqa: E402
from envforge.pipeline.evaluate.runner import RunOptions, evaluate  # noqa: E402
from envforge.pipeline.llm import LLMClient, resolve  # noqa: E402
from envforge.pipeline.sandbox import WorkerPool  # noqa: E402

WAIT = '<thinking_memory>Nothing to do yet.</thinking_memory>\n<action>{"action": "wait", "params": {}}</action>'
SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from envforge.pipeline.testing.llm_server import LLMServer, Reply
server = LLMServer()
server._httpd.RequestHandlerClass.disable_nagle_algorithm = True  # see the benchmark's docstring
server.rule = lambda n: Reply({reply!r}, input_tokens=900, output_tokens=40, delay={latency!r})
server._httpd.socket.listen(256)  # socketserver listens with a backlog of 5: 32 connects at once overflow it
server.start()
print(server.openai_url, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
server.stop()
"""
ROUNDS = ((1, 4, 1), (8, 8, 4), (32, 8, 16))  # (concurrency, levels, runs): 4 waves of C episodes (C >= 8)


def one_round(base_url: str, concurrency: int, levels: int, runs: int, steps: int, out: Path,
              pool: WorkerPool) -> tuple[int, float]:
    targets = find_targets([str(ROOT / "generated_envs" / "reference" / "crate_dock")], "test")
    options = RunOptions("react", "openai/gpt-4o-mini", runs, "test", levels, concurrency,
                         Limits(max_steps=steps, invalid_action_streak=0, format_error_streak=0, loop_visits=0,
                                stagnation_steps=0))

    async def main() -> tuple[int, float]:
        client = LLMClient(resolve(model="openai/gpt-4o-mini", base_url=base_url, no_cache=True,
                                   max_concurrency=concurrency))
        async with client:
            player = make_player("react", client=client, model_options=ModelOptions(max_tokens=256))
            started = time.perf_counter()
            outcome = await evaluate(targets, player, options, Records(out), pool=pool)
            elapsed = time.perf_counter() - started
        bad = [r for r in outcome.finished if r.steps != steps or r.stop_reason != "max_steps"]
        assert not bad, f"episodes did not run {steps} turns: {[(r.steps, r.stop_reason) for r in bad]}"
        return len(outcome.finished), elapsed

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call (default 0.2)")
    parser.add_argument("--steps", type=int, default=10, help="turns per episode (default 10)")
    args = parser.parse_args()
    os.environ.update(OPENAI_API_KEY="loopback", NO_PROXY="127.0.0.1,localhost")
    code = SERVER.format(root=str(ROOT), reply=WAIT, latency=args.latency)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().strip()
    print(f"react agent on crate_dock, {args.steps} turns per episode, model latency {args.latency * 1000:.0f} ms "
          f"(loopback server), {os.cpu_count()} CPU(s)")
    print(
        f"{'concurrency':>11} {'workers':>7} {'episodes':>8} {'seconds':>8} {'episodes/s':>10} {'ideal/s':>8}"
        f" {'ratio':>6}"
    )
    try:
        for concurrency, levels, runs in ROUNDS:
            with WorkerPool(size=concurrency, limits=RunOptions.sandbox) as pool:
                for workers in ("cold", "warm"):
                    with tempfile.TemporaryDirectory() as tmp:
                        episodes, seconds = one_round(base_url, concurrency, levels, runs, args.steps, Path(tmp), pool)
                    ideal_seconds = math.ceil(episodes / concurrency) * args.steps * args.latency
                    print(f"{concurrency:>11} {workers:>7} {episodes:>8} {seconds:>8.2f} {episodes / seconds:>10.2f} "
                          f"{episodes / ideal_seconds:>8.2f} {ideal_seconds / seconds:>6.2f}", flush=True)
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
