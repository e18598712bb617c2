"""Episodes per second and verifications per minute: the local pool against Ray.

    python benchmarks/ray_bench.py [--episodes-runs 4] [--verifications 4]

Method: every figure is one `envforge` command timed end to end (its own start-up included), on
this machine. The random agent plays every test level of both reference environments `--runs`
times (CPU-bound: each step runs in a sandbox worker); verification runs the model-free stages on
copies of crate_dock, several commands at once. "Nodes" are Ray nodes simulated on this one
machine (one CPU each), so adding a node adds no cores: the ratio between 1 and 2 simulated nodes
shows the executor's overhead and how work is spread, and the scaling a user can expect per added
real node is the 1-node row's throughput per core, as long as the driver (models, records) is not
the bottleneck.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVFORGE = str(Path(sys.executable).parent / "envforge")
REFERENCE = ROOT / "generated_envs" / "reference"


def timed(argvs: list[list[str]], cwd: Path) -> float:
    """Seconds for the commands run side by side (all must exit 0)."""
    started = time.monotonic()
    procs = [subprocess.Popen([ENVFORGE, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for argv in argvs]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(proc.args)}: exit {proc.returncode}\n{err[-2000:]}")
    return time.monotonic() - started


def measure(label: str, executor: list[str], runs: int, verifications: int, work: Path, concurrency: int) -> None:
    out = work / label.replace(" ", "_")
    argv = ["evaluate", str(REFERENCE), "--agent", "random", "--runs", str(runs), "--out", str(out),
            "--concurrency", str(concurrency), *executor]
    seconds = timed([argv], work)
    episodes = sum(1 for _ in (out / "episodes.jsonl").open())
    copies = []
    for i in range(verifications):
        copy = work / f"{label.replace(' ', '_')}_env{i}"
        shutil.copytree(REFERENCE / "crate_dock", copy)
        copies.append(["verify", str(copy), "--stages", "execution,levels,reliability", *executor])
    verify_seconds = timed(copies, work)
    print(f"{label:<28} {episodes / seconds:>10.2f} {episodes:>6} {60 * verifications / verify_seconds:>14.2f} "
          f"{verifications:>6}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="random-agent runs per level (default 2)")
    parser.add_argument("--verifications", type=int, default=2, help="verify commands at once (default 2)")
    args = parser.parse_args()
    from envforge.pipeline.sandbox.outside.remote import simulated_cluster

    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(f"{'executor':<28} {'episodes/s':>10} {'of':>6} {'verifies/min':>14} {'of':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        measure("local pool (2 workers)", [], args.runs, args.verifications, work, 2)
        for nodes in (1, 2):
            with simulated_cluster(nodes=nodes) as cluster:  # simulated nodes talk over loopback
                measure(f"ray, {nodes} node(s) x 1 CPU", ["--executor", "ray", "--ray-address", cluster.address],
                        args.runs, args.verifications, work, 2)


if __name__ == "__main__":
    main()
