"""Evaluation throughput: episodes per second at a simulated model latency, for several concurrencies.

    . .venv/bin/activate && python benchmarks/evaluate_bench.py [--latency 0.2] [--steps 10]
        [--concurrency 1,8,32,64] [--phases] [--top 25]

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

Beside each round: envforge's own CPU per turn (this process, every thread: `host ms/turn`), the
sandbox workers' CPU per turn (`worker ms/turn`, read from /proc, the start-up included on a cold
round), and the machine's 1-minute load average when the round ended (the machine may be shared:
a figure is only as good as the load beside it). After the cold and warm rounds of a concurrency,
what one cold worker start cost: the difference between the rounds' CPU, per worker started.

`--phases` plays the same rounds under cProfile (a CPU-time clock, on the event loop's thread
and on every thread of the evaluation's thread pool) and splits envforge's CPU per turn by phase:
prompt rendering, the provider call (the client, the SDK, HTTP, and the hop from the agent's
thread to the loop), reply parsing, the ledger and records, the sandbox round trip (the host's
side: encoding, pipes, checks of the reply), the worker lease (a start on a cold round), and the
rest (the event loop, thread hand-offs, the runner). The profiler slows every call it sees, so
its figures are larger than the unprofiled ones, and its throughput says nothing; the split is
what it is for. `--top N` prints the functions of most CPU of all profiled rounds.

The loopback server writes a response's headers and body in two sends; with Nagle's algorithm
on, the client's delayed ACK holds the body back ~40 ms per call, which is the test server's
artefact, not a model's latency. The benchmark turns Nagle off on the server's sockets.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import math
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from envforge.pipeline.api.evaluate import find_targets  # noqa: E402
from envforge.pipeline.evaluate import Limits, ModelOptions, make_player  # noqa: E402
from envforge.pipeline.evaluate import runner as runner_module  # noqa: E402
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
server._httpd.socket.listen(512)  # socketserver listens with a backlog of 5: 32 connects at once overflow it
server.start()
print(server.openai_url, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
server.stop()
"""
LEVELS = 8  # crate_dock's test levels played, each run as often as makes 4 waves of C episodes (C >= 2)

# phase -> the functions (file ending, name) whose CPU it is, and those to take out of it (called inside)
PHASES = {
    "prompt rendering": ([("evaluate/model_agents.py", "agent_turn"), ("evaluate/model_agents.py", "agent_env")], []),
    # The provider's call runs in a task of its own (asyncio.wait_for), outside call_model's.
    "provider call": ([("evaluate/model_agents.py", "call_model"), ("sandbox/protocol.py", "ask_model"),
                       ("llm/openai_provider.py", "complete"), ("llm/anthropic_provider.py", "complete")],
                      [("llm/ledger.py", n) for n in ("estimate", "reserve", "release", "settle", "charge_unparsed")]),
    "reply parsing": ([("evaluate/react.py", "parse_action"), ("evaluate/react.py", "thought_of"),
                       ("evaluate/model_agents.py", "decision_of")], []),
    "ledger and records": ([("llm/ledger.py", n) for n in ("estimate", "reserve", "release", "settle",
                                                           "charge_unparsed")]
                           + [("pipeline/records.py", "write"), ("pipeline/records.py", "__init__"),
                              ("pipeline/records.py", "close"), ("evaluate/records.py", "add"),
                              ("evaluate/episode.py", "trajectory_line")]
                           + [("evaluate/episode.py", n) for n in ("start", "decided", "stepped", "record")], []),
    "sandbox round trip": ([("outside/client.py", "step"), ("outside/client.py", "reset"),
                            ("outside/client.py", "__init__")], []),
    "worker lease": ([("outside/pool.py", "lease")], []),
}


class Profiled:
    """cProfile on a CPU-time clock, on this thread and on each thread of the evaluation's pool."""

    def __init__(self):
        self.main = cProfile.Profile(time.thread_time)
        self.local = threading.local()
        self.threads: list[cProfile.Profile] = []
        profiled = self

        class Executor(ThreadPoolExecutor):
            def submit(self, fn, /, *args, **kwargs):
                return super().submit(profiled._run, fn, *args, **kwargs)

        self.executor = Executor

    def _run(self, fn, *args, **kwargs):
        profile = getattr(self.local, "profile", None)
        if profile is None:
            profile = self.local.profile = cProfile.Profile(time.thread_time)
            self.threads.append(profile)
        return profile.runcall(fn, *args, **kwargs)

    def __enter__(self) -> "Profiled":
        runner_module.ThreadPoolExecutor = self.executor
        self.main.enable()
        return self

    def __exit__(self, *exc) -> None:
        self.main.disable()
        runner_module.ThreadPoolExecutor = ThreadPoolExecutor

    def stats(self) -> pstats.Stats:
        stats = pstats.Stats(self.main)
        for profile in self.threads:
            stats.add(profile)
        return stats


def phase_seconds(stats: pstats.Stats) -> dict[str, float]:
    """CPU seconds by phase (PHASES), the rest under "other", and "total"."""
    def cum(name: tuple[str, str]) -> float:
        return sum(ct for (file, _, fn), (_, _, _, ct, _) in stats.stats.items()
                   if fn == name[1] and file.endswith(name[0]))

    total = sum(tt for (_, _, tt, _, _) in stats.stats.values())
    out = {phase: sum(map(cum, roots)) - sum(map(cum, inner)) for phase, (roots, inner) in PHASES.items()}
    out["other"] = total - sum(out.values())
    out["total"] = total
    return out


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


def worker_cpu(pool: WorkerPool) -> float:
    """CPU seconds the pool's idle workers have used over their lives (as of their last call)."""
    with pool._lock:
        return sum(w.cpu_seconds_used for ws in pool._idle.values() for w in ws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call (default 0.2)")
    parser.add_argument("--steps", type=int, default=10, help="turns per episode (default 10)")
    parser.add_argument("--concurrency", default="1,8,32,64", help="comma-separated concurrencies (default 1,8,32,64)")
    parser.add_argument("--phases", action="store_true", help="profile the rounds and split CPU per turn by phase")
    parser.add_argument("--top", type=int, default=0, help="with --phases: print the N functions of most CPU")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    os.environ.update(OPENAI_API_KEY="loopback", NO_PROXY="127.0.0.1,localhost")
    code = SERVER.format(root=str(ROOT), reply=WAIT, latency=args.latency)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().strip()
    print(f"react agent on crate_dock, {args.steps} turns per episode, model latency {args.latency * 1000:.0f} ms "
          f"(loopback server), {os.cpu_count()} CPU(s){', profiled (--phases)' if args.phases else ''}")
    if args.phases:
        print(f"{'concurrency':>11} {'workers':>7} " + " ".join(f"{p:>12.12}" for p in (*PHASES, "other", "total"))
              + f" {'load':>5}   (ms of envforge's CPU per turn)")
    else:
        print(f"{'concurrency':>11} {'workers':>7} {'episodes':>8} {'seconds':>8} {'episodes/s':>10} {'ideal/s':>8}"
              f" {'ratio':>6} {'host ms/turn':>12} {'worker ms/turn':>14} {'load':>5}")
    everything = None
    try:
        for concurrency in concurrencies:
            levels, runs = (4, 1) if concurrency == 1 else (LEVELS, max(1, 4 * concurrency // LEVELS))
            cpu = {}
            with WorkerPool(size=concurrency, limits=RunOptions.sandbox) as pool:
                for workers in ("cold", "warm"):
                    started, host0, worker0 = pool.started, time.process_time(), worker_cpu(pool)
                    profiled = Profiled() if args.phases else None
                    with tempfile.TemporaryDirectory() as tmp:
                        if profiled:
                            with profiled:
                                episodes, seconds = one_round(base_url, concurrency, levels, runs, args.steps,
                                                              Path(tmp), pool)
                        else:
                            episodes, seconds = one_round(base_url, concurrency, levels, runs, args.steps, Path(tmp),
                                                          pool)
                    turns = episodes * args.steps
                    host, worker = time.process_time() - host0, worker_cpu(pool) - worker0
                    cpu[workers] = (host / turns, worker / turns, pool.started - started, turns)
                    load = os.getloadavg()[0]
                    if profiled:
                        stats = profiled.stats()
                        figures = phase_seconds(stats)
                        print(f"{concurrency:>11} {workers:>7} "
                              + " ".join(f"{1000 * v / turns:>12.2f}" for v in figures.values()) + f" {load:>5.1f}",
                              flush=True)
                        everything = stats if everything is None else (everything.add(stats) or everything)
                        continue
                    ideal_seconds = math.ceil(episodes / concurrency) * args.steps * args.latency
                    print(f"{concurrency:>11} {workers:>7} {episodes:>8} {seconds:>8.2f} {episodes / seconds:>10.2f} "
                          f"{episodes / ideal_seconds:>8.2f} {ideal_seconds / seconds:>6.2f} "
                          f"{1000 * host / turns:>12.2f} {1000 * worker / turns:>14.2f} {load:>5.1f}", flush=True)
            (host_c, worker_c, started, turns), (host_w, worker_w, _, _) = cpu["cold"], cpu["warm"]
            if started and not args.phases:
                each = 1000 * turns / started
                print(f"{'':>11} cold start of {started} worker(s): {(host_c - host_w) * each:.0f} ms of envforge's "
                      f"CPU and {(worker_c - worker_w) * each:.0f} ms of the worker's, each", flush=True)
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    if everything is not None and args.top:
        print(f"\nthe {args.top} functions of most CPU (self time) over all profiled rounds:")
        everything.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
