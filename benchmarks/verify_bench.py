"""Verification benchmark: what `envforge verify` costs and proves on each environment of some folders.

    . .venv/bin/activate && python benchmarks/verify_bench.py [FOLDER ...] [--only NAME ...] [--repeat 1]
        [--json-out FILE] [-- VERIFY ARGS ...]

FOLDER: a folder of environments (every subfolder with an env_main.py) or one environment;
default generated_envs/reference/. Each environment is copied to a temporary folder (the
original is never written) and verified there by `envforge verify --json --write` as a
subprocess, with its defaults unless VERIFY ARGS follow `--`. Per environment it prints:

  * wall and CPU seconds of the command and every sandbox worker it started (they are
    reaped before it exits, so their CPU time is in this process's RUSAGE_CHILDREN);
  * levels scored, and how their max rewards stand: exact (proved: the space searched
    exhaustively, or an upper bound met), claim-met (a validator's or shipped claim reached by
    a witness, not proved), lower bounds (with the largest gap to the search's upper bound
    when one is known, "?" when not, and then "~gap" to what the search's steps suggest, a
    hypothesis verify labels as such), unknown (nothing found);
  * search nodes and nodes per second of the levels stage (nodes over the seconds its
    searches ran, summed over the workers);
  * the verdict.
Then the load average before and after (the machine may be shared) and the median wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"
sys.path.insert(0, str(ROOT))

from envforge.pipeline import layout  # noqa: E402
from envforge.pipeline import records as files  # noqa: E402
from envforge.pipeline.kinds import LevelMaxEntry, LevelMaxRewards, LevelsFigures, Verification  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def environments(folders: list[Path]) -> list[Path]:
    out = []
    for folder in folders:
        if (folder / "env_main.py").is_file():
            out.append(folder)
        elif folder.is_dir():
            out += sorted((p for p in folder.iterdir() if (p / "env_main.py").is_file()), key=_natural)
        else:
            raise SystemExit(f"{folder}: expected a folder of environments or an environment, found none")
    return out


def _natural(path: Path):
    head = path.name.split("_", 1)[0]
    return (int(head), path.name) if head.isdigit() else (1 << 30, path.name)


def bench(env: Path, verify_args: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
        copy = Path(tmp) / env.name
        shutil.copytree(env, copy, ignore=shutil.ignore_patterns("__pycache__", "_generated"), symlinks=True)
        (copy / layout.VERIFICATION).unlink(missing_ok=True)  # only this run's verdict is read back
        cpu, wall = children_cpu(), time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "envforge", "verify", str(copy), "--json", "--write",
                               *verify_args], capture_output=True, text=True, cwd=ROOT)
        wall, cpu = time.monotonic() - wall, children_cpu() - cpu
        report = files.read(copy / layout.VERIFICATION, Verification)
        if report is None:
            return {"name": env.name, "wall": wall, "cpu": cpu, "error": proc.stderr.strip()[-600:] or "no output"}
        levels = written_levels(copy, report)
    return {"name": env.name, "wall": wall, "cpu": cpu, "report": report, "levels": levels,
            **classify(report, levels)}


def as_json(run: dict) -> dict:
    """A run as --json-out keeps it: the records as their files hold them."""
    if "report" not in run:
        return run
    return {**run, "report": run["report"].to_dict(), "levels": {k: e.to_dict() for k, e in run["levels"].items()}}


def written_levels(env: Path, report: Verification) -> dict[str, LevelMaxEntry]:
    """The level_max_rewards.json entries verify wrote ({} when it wrote none: a shipped file is a
    claim, not verify's result)."""
    figures = report.stages.levels
    if figures is None or layout.LEVEL_MAX_REWARDS not in (figures.written or []):
        return {}
    return files.read(env / layout.LEVEL_MAX_REWARDS, LevelMaxRewards).levels


def classify(report: Verification, levels: dict[str, LevelMaxEntry]) -> dict:
    """How the max rewards stand, from level_max_rewards.json (written by verify --write) or,
    without one (no shipped levels), the levels stage's figures."""
    figures = report.stages.levels or LevelsFigures()
    exact = claim_met = unknown = 0
    gaps: list[float | None] = []
    hinted: list[float] = []  # gaps to an evidence bound (a hypothesis) where no upper bound is known
    if not levels:  # only figures (verify rejected before writing): what they name
        lower = figures.lower_bounds or []
        scored = figures.levels_scored or []
        exact = len(figures.exact_levels or [])
        unknown = len(figures.unknown_maxima or [])
        gaps = [(figures.gaps or {}).get(key) for key in lower]
        claim_met = max(0, len(scored) - len(lower) - exact - unknown)
    for entry in levels.values():
        # verify's certification fields of the AutoEnv C.1 entry (pipeline.kinds.LevelMaxEntry)
        certainty = entry.certainty
        if entry.exact or (certainty == "certified" and entry.search_exhaustive):
            exact += 1
        elif certainty in ("certified", "claim_met", "unconfirmed_bound"):
            claim_met += 1
        elif certainty == "unknown":
            unknown += 1
        else:
            upper = entry.upper_bound
            gaps.append(None if upper is None else max(0.0, upper - entry.max_reward))
            if upper is None and entry.evidence_bound is not None:
                hinted.append(max(0.0, entry.evidence_bound - entry.max_reward))
    nodes, seconds = figures.search_nodes, figures.search_seconds
    return {"scored": len(levels) or len(figures.levels_scored or []), "exact": exact,
            "claim_met": claim_met, "lower": gaps, "hinted": hinted, "unknown": unknown, "nodes": nodes,
            "nodes_per_second": nodes / seconds if seconds else None, "cut": figures.safety_stops or 0}


def _gaps(gaps: list, hinted: list) -> str:
    """Lower bounds: how many, their largest gap to an upper bound, how many have none ("gap ?"), and
    of those how far the evidence (a hypothesis, not a proof) puts the max at most ("~gap")."""
    if not gaps:
        return "0"
    known = [g for g in gaps if g is not None]
    text = f"{len(gaps)}"
    if known:
        text += f" (gap<={max(known):.3g})"
    if len(known) < len(gaps):
        hint = f", {len(hinted)} ~gap<={max(hinted):.3g}" if hinted else ""
        text += f" ({len(gaps) - len(known)} gap ?{hint})"
    return text


def main() -> int:
    argv = sys.argv[1:]
    verify_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="folders of environments (default: the references)")
    parser.add_argument("--only", nargs="*", default=[], help="environment names to run (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per environment (default 1)")
    parser.add_argument("--json-out", type=Path, help="also write every run's figures and report here")
    parser.add_argument("--reprint", type=Path, metavar="FILE", help="print the table of an earlier --json-out FILE")
    args = parser.parse_args(argv)
    if args.reprint:
        reprint(args.reprint)
        return 0
    envs = [e for e in environments(args.folders or [REFERENCE]) if not args.only or e.name in args.only]
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores; "
          f"verify args: {' '.join(verify_args) or '(defaults)'}", flush=True)
    header = (f"{'env':<22} {'verdict':<22} {'wall s':>7} {'CPU s':>7} {'levels':>6} {'exact':>5} {'claim':>5} "
              f"{'lower (gap)':<20} {'unknown':>7} {'nodes':>9} {'nodes/s':>8}")
    print(header, flush=True)
    runs = []
    for env in envs:
        for _ in range(args.repeat):
            run = bench(env, verify_args)
            runs.append(run)
            if "error" in run:
                print(f"{env.name:<22} ERROR {run['wall']:7.1f} {run['cpu']:7.1f}  {run['error'][-200:]!r}", flush=True)
                continue
            report = run["report"]
            verdict = "accepted" if report.accepted else f"REJECTED at {report.stage}"
            rate = f"{run['nodes_per_second']:8.0f}" if run["nodes_per_second"] else f"{'-':>8}"
            lower = _gaps(run["lower"], run.get("hinted") or [])
            print(f"{env.name:<22} {verdict:<22} {run['wall']:7.1f} {run['cpu']:7.1f} {run['scored']:6d} "
                  f"{run['exact']:5d} {run['claim_met']:5d} {lower:<20} {run['unknown']:7d} "
                  f"{run['nodes']:9d} {rate}", flush=True)
    walls = [r["wall"] for r in runs]
    load = os.getloadavg()
    print(f"median wall {statistics.median(walls):.1f}s over {len(walls)} run(s); load average at end: "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for run in runs:
        if "report" in run and not run["report"].accepted:
            print(f"  {run['name']}: {run['report'].reason[:300]}")
    if args.json_out:
        args.json_out.write_text(json.dumps([as_json(run) for run in runs], indent=1, default=str))
    return 0 if all("report" in r and r["report"].accepted for r in runs) else 1


def reprint(path: Path) -> None:
    """The table again from a --json-out file (after a change to how levels are classified)."""
    for run in json.loads(path.read_text()):
        if "report" not in run:
            print(f"{run['name']:<22} ERROR {run['wall']:7.1f} {run['cpu']:7.1f}")
            continue
        report = Verification.from_dict(run["report"], f"{path}: {run['name']}")
        figures = report.stages.levels
        written = figures is not None and layout.LEVEL_MAX_REWARDS in (figures.written or [])
        levels = {key: LevelMaxEntry.from_dict(entry, f"{path}: {run['name']}: {key}")
                  for key, entry in run["levels"].items()} if written else {}
        run.update(classify(report, levels))
        verdict = "accepted" if report.accepted else f"REJECTED at {report.stage}"
        rate = f"{run['nodes_per_second']:8.0f}" if run["nodes_per_second"] else f"{'-':>8}"
        lower = _gaps(run["lower"], run.get("hinted") or [])
        print(f"{run['name']:<22} {verdict:<22} {run['wall']:7.1f} {run['cpu']:7.1f} {run['scored']:6d} "
              f"{run['exact']:5d} {run['claim_met']:5d} {lower:<20} {run['unknown']:7d} "
              f"{run['nodes']:9d} {rate}")


if __name__ == "__main__":
    sys.exit(main())
