"""Difficulty benchmark: profiles per second, and the spread of difficulty that environments' shipped
levels cover (pipeline/difficulty.py).

    . .venv/bin/activate && python benchmarks/difficulty_bench.py [ENV_DIR...] [--json-out FILE]

Default: generated_envs/reference/* and the twelve AutoEnv development environments in
/work/shared/autoenv-dev/ (or $AUTOENV_DEV). Each is verified as `envforge verify --stages
reliability --write` does (the levels stage certifies its shipped levels first), on a temporary
copy, so nothing in the folder changes. Per environment it prints the verdict, the levels profiled,
the seconds spent in the profiles alone (`difficulty.profile`: its breadth-first search, timed
around each call) and profiles per second, and the spread: scores min / median / max, levels per
band, how many shortest witnesses are exact, and the trivial levels. An environment rejected before
the reliability stage has no profiles (the line says why).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envforge.pipeline import difficulty, layout  # noqa: E402
from envforge.pipeline import records as files  # noqa: E402
from envforge.pipeline.kinds import LevelMaxRewards  # noqa: E402
from envforge.pipeline.verify import VerifyRunOptions, reliability, verify_env  # noqa: E402

AUTOENV_DEV = Path(os.environ.get("AUTOENV_DEV", "/work/shared/autoenv-dev"))
_timed = threading.local()


def _timing_profile():
    """Wrap difficulty.profile (as reliability calls it) to sum the seconds spent in it."""
    inner = difficulty.profile
    spent = {"seconds": 0.0, "calls": 0}
    lock = threading.Lock()

    def profile(*args, **kwargs):
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            with lock:
                spent["seconds"] += time.perf_counter() - started
                spent["calls"] += 1

    reliability.difficulty.profile = profile
    return spent, lambda: setattr(reliability.difficulty, "profile", inner)


def bench(env: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="difficulty-bench-") as tmp:
        copy = Path(tmp) / env.name
        shutil.copytree(env, copy, ignore=shutil.ignore_patterns("__pycache__", layout.GENERATED_LEVELS), symlinks=True)
        spent, undo = _timing_profile()
        started = time.perf_counter()
        try:
            result = verify_env(copy, ("reliability",), VerifyRunOptions(write=True, budget_seconds=None))
        finally:
            undo()
        wall = time.perf_counter() - started
        rel = result.stages.reliability
        row = {"env": env.name, "accepted": result.accepted, "stage": result.stage, "wall_seconds": round(wall, 1),
               "profiles": spent["calls"], "profile_seconds": round(spent["seconds"], 2),
               "profiles_per_second": round(spent["calls"] / spent["seconds"], 2) if spent["seconds"] else None}
        if not rel or not rel.difficulty:
            row["why_none"] = result.reason[:160]
            return row
        maxima = files.read(copy / layout.LEVEL_MAX_REWARDS, LevelMaxRewards)
        profiles = [e.difficulty for e in maxima.levels.values() if e.difficulty is not None]
        scores = sorted(p.score for p in profiles)
        row.update(scores={"min": scores[0], "median": statistics.median(scores), "max": scores[-1]},
                   bands=difficulty.histogram(scores), exact_shortest=sum(p.shortest_witness.exact for p in profiles),
                   trivial=sum(bool(p.trivial) for p in profiles), levels=len(profiles))
        return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", type=Path)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    envs = args.envs or sorted(p for p in (ROOT / "generated_envs" / "reference").iterdir()
                               if (p / layout.ENV_MAIN).is_file()) + sorted(
        p for p in AUTOENV_DEV.iterdir() if p.is_dir() and (p / "config.yaml").is_file())
    rows = []
    for env in envs:
        row = bench(env)
        rows.append(row)
        if "scores" in row:
            s, b = row["scores"], row["bands"]
            print(f"{row['env']:<22} {'accepted' if row['accepted'] else 'rejected at ' + row['stage']:<24} "
                  f"{row['levels']:>2} levels, scores {s['min']}/{s['median']:g}/{s['max']} (min/median/max), "
                  f"{b['easy']} easy {b['medium']} medium {b['hard']} hard, {row['exact_shortest']} exact shortest, "
                  f"{row['trivial']} trivial; {row['profiles']} profiles in {row['profile_seconds']}s "
                  f"({row['profiles_per_second']}/s); verify {row['wall_seconds']}s", flush=True)
        else:
            print(f"{row['env']:<22} {'accepted' if row['accepted'] else 'rejected at ' + str(row['stage']):<24} "
                  f"no profiles: {row['why_none']}", flush=True)
    done = [r for r in rows if r["profiles"]]
    total, seconds = sum(r["profiles"] for r in done), sum(r["profile_seconds"] for r in done)
    print(f"total: {total} profiles in {seconds:.1f}s ({total / seconds if seconds else 0:.2f}/s) over {len(done)} "
          f"environment(s); load average {os.getloadavg()[0]:.2f}")
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
