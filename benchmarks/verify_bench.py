"""Verification benchmark: wall and CPU seconds to verify each reference environment.

    . .venv/bin/activate && python benchmarks/verify_bench.py [--repeat 1] [NAME ...]

Runs `envforge verify --json` as a subprocess on a temporary copy of each environment under
generated_envs/reference/ (the committed folders are never written), and prints the wall
seconds and the CPU seconds of the command and every sandbox worker it started (they are
reaped before it exits, so their CPU time is in this process's RUSAGE_CHILDREN), then the
figures of each stage as the command recorded them.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(name: str) -> tuple[float, float, dict]:
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
        copy = Path(tmp) / name
        shutil.copytree(REFERENCE / name, copy, ignore=shutil.ignore_patterns("__pycache__", "_generated"))
        cpu, wall = children_cpu(), time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "verify", str(copy), "--json"],
                              capture_output=True, text=True, cwd=ROOT)
        wall, cpu = time.monotonic() - wall, children_cpu() - cpu
    if not proc.stdout.strip():
        raise SystemExit(f"{name}: verify printed nothing: {proc.stderr[-2000:]}")
    return wall, cpu, json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="reference env names (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per environment (default 1)")
    args = parser.parse_args()
    names = args.names or sorted(p.name for p in REFERENCE.iterdir() if (p / "env_main.py").is_file())
    print(f"{'env':<12} {'verdict':<9} {'wall s':>7} {'CPU s':>7}")
    reports = {}
    for name in names:
        for _ in range(args.repeat):
            wall, cpu, report = bench(name)
            reports[name] = report
            verdict = "accepted" if report["accepted"] else f"REJECTED at {report['stage']}"
            print(f"{name:<12} {verdict:<9} {wall:7.2f} {cpu:7.2f}")
    for name, report in reports.items():
        s = report["stages"]
        ex, lv, rl = s.get("execution", {}), s.get("levels", {}), s.get("reliability", {})
        print(f"\n{name}:")
        print(f"  execution   {ex.get('episodes')} episodes, {ex.get('steps')} steps, planner {ex.get('planner_nodes')} "
              f"nodes, failures {ex.get('failures_by_kind') or 'none'}; {ex.get('wall_seconds')}s wall, "
              f"{ex.get('cpu_seconds')}s CPU")
        print(f"  levels      {lv.get('seeds_tried')} seeds tried, {lv.get('generated_kept')} kept, "
              f"{lv.get('duplicates')} duplicates, {lv.get('unfit')} unfit, {lv.get('corrected')} corrected; search "
              f"{lv.get('search_nodes')} nodes in {lv.get('search_seconds')}s; {lv.get('wall_seconds')}s wall, "
              f"{lv.get('cpu_seconds')}s CPU")
        print(f"  reliability random {rl.get('random_normalized')} vs planner {rl.get('planner_normalized')} normalized, "
              f"{rl.get('episodes')} episodes; {rl.get('wall_seconds')}s wall, {rl.get('cpu_seconds')}s CPU")
        if not report["accepted"]:
            print(f"  reason      {report['reason']}")
    return 0 if all(r["accepted"] for r in reports.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
