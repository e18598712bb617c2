"""Search benchmark: nodes per second of the levels stage's search, level by level.

    . .venv/bin/activate && python benchmarks/search_bench.py ENV_DIR [--levels N] [--nodes 20000]
        [--workers 1] [--json-out FILE] [--compare FILE]

Certifies the first N shipped levels of one environment exactly as `envforge verify`'s levels
stage does (pipeline/levelmax.py's `certify`, the validator's bound as its target), in
sandbox workers, on a temporary copy of the folder (the worker writes level aliases into it).
Per level it prints the wall seconds of the certification (search passes, witness replay and
the do-nothing rollout), the nodes searched and nodes per second, the max reward and how it
stands; then the totals and the load average.

--json-out FILE keeps every level's figures and result; --compare FILE (an earlier --json-out)
asserts that this run found the same thing on every level (max reward, search reward, witness,
proof, certainty, nodes) and prints the speed-up: a change to how the search runs must not
change what it finds with the same node budget. Exit status 1 when it differs.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envforge.pipeline.kinds import LevelsFigures  # noqa: E402
from envforge.pipeline.levelmax import certify  # noqa: E402
from envforge.pipeline.verify.certify import PooledCertifier, standing  # noqa: E402
from envforge.pipeline.verify.context import Context, VerifyRunOptions  # noqa: E402

SAME = ("max_reward", "search_reward", "witness", "proof", "certainty", "search_nodes", "search_exhaustive")


def run_levels(env: Path, levels: int, nodes: int, workers: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        copy = Path(tmp) / env.name
        shutil.copytree(env, copy, ignore=shutil.ignore_patterns("__pycache__", "_generated"), symlinks=True)
        ctx = Context.open(copy, VerifyRunOptions(search_nodes=nodes, workers=workers, budget_seconds=None))
        sources = ctx.env.all_levels()[:levels]
        out = []
        with contextlib.ExitStack() as stack:
            clients = [stack.enter_context(ctx.worker()) for _ in range(max(1, workers))]
            verdicts = {s: clients[0].validate(s) for s in sources}
            if workers > 1:  # as verify runs them: a pool of workers, a level each at a time
                certifier = PooledCertifier(ctx, clients, LevelsFigures())
                stack.callback(certifier.pool.shutdown)
                started = time.monotonic()
                done = certifier.many([(s, verdicts[s]) for s in sources])
                wall = time.monotonic() - started
                for lm in done:  # the levels ran at once: each is given the mean wall per level
                    out.append(_row(lm, wall / len(done)))
                    _print(out[-1])
            else:
                for source in sources:
                    started = time.monotonic()
                    verdict = verdicts[source]
                    lm = certify(ctx.search, clients[0], source, verdict.max_reward, verdict.state_hash)
                    out.append(_row(lm, time.monotonic() - started))
                    _print(out[-1])
        return out


def _row(lm, wall: float) -> dict:
    row = {k: getattr(lm, k) for k in SAME}
    return row | {"source": lm.source, "wall": round(wall, 3), "standing": standing(lm)}


def _print(row: dict) -> None:
    rate = row["search_nodes"] / row["wall"] if row["wall"] else 0
    print(f"{row['source']:<28} {row['wall']:8.2f} {row['search_nodes']:8d} {rate:9.0f}  {row['standing']}", flush=True)


def compare(before: list[dict], after: list[dict]) -> list[str]:
    """What differs between two runs' levels (none: the same search results)."""
    problems = []
    old = {row["source"]: row for row in before}
    for row in after:
        was = old.get(row["source"])
        if was is None:
            problems.append(f"{row['source']}: not in the earlier run")
            continue
        for key in SAME:
            if was[key] != row[key]:
                problems.append(f"{row['source']}: {key} was {was[key]!r}, now {row[key]!r}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", type=Path, help="an environment folder with shipped levels")
    parser.add_argument("--levels", type=int, default=3, help="the first N shipped levels (default 3)")
    parser.add_argument("--nodes", type=int, default=VerifyRunOptions().search_nodes, help="search nodes per level")
    parser.add_argument("--workers", type=int, default=1, help="workers searching at once (default 1)")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--compare", type=Path, metavar="FILE", help="an earlier --json-out: assert the same results")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"{args.env.name}: {args.levels} level(s), {args.nodes:,} nodes each, {args.workers} worker(s); "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    print(f"{'level':<28} {'wall s':>8} {'nodes':>8} {'nodes/s':>9}  max", flush=True)
    started, cpu = time.monotonic(), _children_cpu()
    rows = run_levels(args.env, args.levels, args.nodes, args.workers)
    wall, cpu = time.monotonic() - started, _children_cpu() - cpu
    total = sum(r["search_nodes"] for r in rows)
    load = os.getloadavg()
    print(f"total: {wall:.1f}s wall, {cpu:.1f}s worker CPU, {total:,} nodes, {total / wall:,.0f} nodes/s wall, "
          f"{total / cpu if cpu else 0:,.0f} nodes per CPU second; load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "wall": wall, "cpu": cpu}, indent=1))
    if args.compare:
        earlier = json.loads(args.compare.read_text())
        problems = compare(earlier["rows"], rows)
        for problem in problems:
            print(f"DIFFERS: {problem}")
        if problems:
            return 1
        print(f"same results on all {len(rows)} level(s); wall {earlier['wall']:.1f}s -> {wall:.1f}s "
              f"({earlier['wall'] / wall:.2f}x), worker CPU {earlier['cpu']:.1f}s -> {cpu:.1f}s "
              f"({earlier['cpu'] / cpu if cpu else 0:.2f}x)")
    return 0


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    sys.exit(main())
