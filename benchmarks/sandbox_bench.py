"""Sandbox benchmark: step latency through a worker versus in process, and throughput.

    . .venv/bin/activate && python benchmarks/sandbox_bench.py [--steps 500] [--env DIR]

Prints the median latency of one `Worker.call("step")`, the median latency of the same step
made in process, and the steps per second of 1, 2 and 8 workers from a `WorkerPool`, each
driven by its own thread for a fixed number of steps. The env is
generated_envs/reference/crate_dock when it has levels, else a tiny env written to a temp dir.

The in-process number runs the env in *this* process, through the same `EnvHost` the worker
uses (so it differs from the sandboxed number only by the process boundary and JSON). That is
acceptable because this script is a separate process, never envforge itself, and the env is a
hand-written reference env (or the tiny one below), never model-written code.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envforge.pipeline.envfolder.actions import ActionSpace  # noqa: E402
from envforge.pipeline.sandbox import SandboxLimits, Worker, WorkerPool, capabilities  # noqa: E402

REFERENCE = ROOT / "generated_envs" / "reference" / "crate_dock"
TINY_MAIN = '''
from pipeline.runtime import SkinEnv


class Tally(SkinEnv):
    def transition(self, action):
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 1.0, ["tick"], {}
'''
TINY_CONFIG = {"transition": {"actions": [{"name": "tick", "description": "Count one.", "params": []}]},
               "termination": {"max_steps": 50}}
LIMITS = SandboxLimits(call_seconds=10, cpu_seconds=600)


def pick_env(scratch: Path) -> Path:
    if (REFERENCE / "levels").is_dir() and any((REFERENCE / "levels").glob("*.yaml")):
        return REFERENCE
    env = scratch / "tally"
    (env / "levels").mkdir(parents=True)
    (env / "env_main.py").write_text(TINY_MAIN.lstrip())
    (env / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    (env / "levels" / "level_01.yaml").write_text("n: 0\n")
    return env


def first_level(env: Path) -> str:
    return str(sorted((env / "levels").glob("*.yaml"))[0].relative_to(env))


def action_plan(env: Path, steps: int, seed: int) -> list[dict]:
    space = ActionSpace.from_config(yaml.safe_load((env / "config.yaml").read_text()))
    rng = random.Random(seed)
    return [space.sample(rng) for _ in range(steps)]


def drive(call, level: str, plan: list[dict]) -> list[float]:
    """Step through `plan`, resetting at the end of each episode; per-step seconds."""
    times = []
    call("reset", level=level, seed=0)
    for action in plan:
        started = time.perf_counter()
        out = call("step", action=action)
        times.append(time.perf_counter() - started)
        if out["terminated"] or out["capped"]:
            call("reset", level=level, seed=0)
    return times


def in_process(env: Path, plan: list[dict]) -> list[float]:
    from envforge.pipeline.sandbox import protocol
    from envforge.pipeline.sandbox.inside import host

    scratch = Path(tempfile.mkdtemp(prefix="envforge-bench-"))
    copy = scratch / "env"
    shutil.copytree(env, copy, ignore=shutil.ignore_patterns("__pycache__"))
    cwd = os.getcwd()
    os.chdir(copy)  # where a worker runs its env
    try:
        env_host = host.EnvHost(str(copy))

        def call(op, **args):
            reply = env_host.handle({"op": op, "args": args})
            protocol.encode(reply)  # the worker serialises every reply; count it
            if not reply["ok"]:
                raise RuntimeError(reply)
            return reply["result"]

        call("load")
        return drive(call, first_level(env), plan)
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)


def throughput(env: Path, workers: int, steps_each: int) -> tuple[float, float]:
    """(steps per second over all workers, seconds to start the workers)."""
    level = first_level(env)
    with WorkerPool(workers, LIMITS) as pool:
        # Start every worker first, so the timed part is stepping only.
        started = time.perf_counter()
        leases = [pool.lease(env) for _ in range(workers)]
        held = [lease.__enter__() for lease in leases]
        start_seconds = time.perf_counter() - started
        barrier = threading.Barrier(workers + 1)

        def run(worker: Worker, seed: int) -> None:
            plan = action_plan(env, steps_each, seed)
            barrier.wait()
            drive(worker.call, level, plan)

        threads = [threading.Thread(target=run, args=(w, i)) for i, w in enumerate(held)]
        for t in threads:
            t.start()
        barrier.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - began
        for lease in leases:
            lease.__exit__(None, None, None)
    return workers * steps_each / elapsed, start_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps per latency run and per worker")
    parser.add_argument("--env", type=Path, help="environment folder (default: crate_dock or a tiny env)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="envforge-bench-"))
    try:
        env = (args.env.resolve() if args.env else pick_env(scratch))
        plan = action_plan(env, args.steps, seed=0)
        caps = capabilities()
        print(f"env: {env.relative_to(ROOT) if env.is_relative_to(ROOT) else env.name}   "
              f"sandbox mode: {caps['mode']}   cpus: {os.cpu_count()}   steps: {args.steps}")

        started = time.perf_counter()
        with Worker(env, LIMITS) as worker:
            start_ms = (time.perf_counter() - started) * 1000
            sandboxed = drive(worker.call, first_level(env), plan)
        local = in_process(env, plan)
        med_sbx, med_local = statistics.median(sandboxed) * 1e6, statistics.median(local) * 1e6
        print()
        print(f"{'step latency':<28}{'median µs':>12}{'p90 µs':>10}")
        print(f"{'sandboxed (Worker.call)':<28}{med_sbx:>12.0f}{_p90(sandboxed) * 1e6:>10.0f}")
        print(f"{'in process (EnvHost)':<28}{med_local:>12.0f}{_p90(local) * 1e6:>10.0f}")
        print(f"{'overhead of the sandbox':<28}{med_sbx - med_local:>12.0f}{'':>10}   "
              f"(worker start: {start_ms:.0f} ms)")
        print()
        print(f"{'workers':<10}{'steps/s':>10}{'per worker':>12}{'start s':>10}")
        for n in (1, 2, 8):
            rate, start = throughput(env, n, args.steps)
            print(f"{n:<10}{rate:>10.0f}{rate / n:>12.0f}{start:>10.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


if __name__ == "__main__":
    main()
