"""Audit environments envforge did not make: `check`, `verify` (read-only) and a random and a
planner `evaluate` on each, summarised as one Markdown table (README: "Auditing existing
environments"). Every command runs on a private copy; the folders audited are never written.

    python scripts/audit_autoenv.py ../shared/autoenv-dev [--out audit.md] [--search-nodes N]

Each row: the check verdict (errors), the verify verdict with its stage and reason, the mean
normalized score of the random and the planner agent on the test levels, and how many of their
episodes ended in env_error.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENVFORGE = [sys.executable, "-m", "envforge"]


def run(*args: str, timeout: float = 3600) -> tuple[int, str, str]:
    done = subprocess.run([*ENVFORGE, *args], capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def private_copy(env: Path, base: Path) -> Path:
    target = base / env.name
    shutil.copytree(env, target, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def audit(env: Path, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="envforge-audit-") as tmp:
        base = Path(tmp)
        row = {"env": env.name}
        code, out, _ = run("check", str(private_copy(env, base / "check")), "--json")
        report = json.loads(out) if out.strip().startswith("{") else {"problems": []}
        errors = [p for p in report.get("problems", []) if p["severity"] == "error"]
        row["check"] = "ok" if code == 0 else f"{len(errors)} error(s)"
        row["check_first"] = _problem(errors[0]) if errors else ""
        code, out, err = run("verify", str(private_copy(env, base / "verify")), "--json",
                             *(["--search-nodes", str(args.search_nodes)] if args.search_nodes else []),
                             "--call-seconds", str(args.call_seconds))
        verdict = json.loads(out) if out.strip().startswith("{") else {"accepted": False, "stage": "error",
                                                                       "reason": (err or out).strip()[-300:]}
        row["verify"] = "accepted" if verdict["accepted"] else f"rejected at {verdict['stage']}"
        row["reason"] = verdict["reason"]
        claims = {}
        for stage in ("levels", "reliability"):
            claims = (verdict.get("stages", {}).get(stage) or {}).get("claims") or claims
        row["claims"] = _claims(claims)
        for agent in ("random", "planner"):
            code, out, err = run("evaluate", str(private_copy(env, base / agent)), "--agent", agent, "--runs", "1",
                                 "--max-levels", str(args.max_levels),
                                 "--call-seconds", str(args.call_seconds), "--out", str(base / f"eval-{agent}"),
                                 "--json")
            summary = json.loads(out) if out.strip().startswith("{") else {}
            overall = summary.get("overall") or {}
            score = overall.get("normalized_mean", overall.get("mean_normalized"))
            row[agent] = "-" if score is None else f"{score:.2f}"
            row[f"{agent}_env_errors"] = _env_errors(base / f"eval-{agent}")
            row[f"{agent}_note"] = err.strip().splitlines()[-1] if code != 0 and err.strip() else ""
        return row


def _problem(p: dict) -> str:
    where = f"{p['file']}:{p['line']}" if p.get("line") else p["file"]
    return f"{where}: expected {p['expected']}, found {p['found']}"


def _claims(compared: dict) -> str:
    counts: dict[str, int] = {}
    for entry in compared.values():
        counts[entry["status"]] = counts.get(entry["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "-"


def _env_errors(out: Path) -> int:
    path = out / "episodes.jsonl"
    if not path.is_file():
        return 0
    return sum(json.loads(line).get("stop_reason") == "env_error" for line in path.read_text().splitlines() if line)


def table(rows: list[dict]) -> str:
    lines = [
        "| environment | check | verify | reason | shipped max-reward claims | random | planner | env_error episodes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        reason = r["reason"].replace("|", "\\|").replace("\n", " ")
        reason = reason if len(reason) <= 400 else reason[:397] + "..."
        lines.append(f"| {r['env']} | {r['check']} | {r['verify']} | {reason} | {r['claims']} | {r['random']} | "
                     f"{r['planner']} | {r['random_env_errors'] + r['planner_env_errors']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="folder holding one environment folder per subfolder")
    parser.add_argument("--out", type=Path, help="write the Markdown table (and a .json beside it) here")
    parser.add_argument("--only", help="comma-separated folder names to audit (default all)")
    parser.add_argument("--search-nodes", type=int, default=0,
                        help="verify's search budget per level, in nodes (default: verify's own default)")
    parser.add_argument("--max-levels", type=int, default=5, help="test levels each evaluate agent plays")
    parser.add_argument("--call-seconds", type=float, default=30.0,
                        help="wall-clock limit of one reset or step (a loaded machine needs more than the default)")
    args = parser.parse_args()
    envs = sorted((p for p in args.corpus.iterdir() if (p / "env_main.py").is_file()),
                  key=lambda p: (int(p.name.split("_")[0]) if p.name.split("_")[0].isdigit() else 0, p.name))
    if args.only:
        wanted = set(args.only.split(","))
        envs = [p for p in envs if p.name in wanted]
    rows = []
    for env in envs:
        rows.append(audit(env, args))
        print(f"{env.name}: {rows[-1]['verify']}", file=sys.stderr)
        if args.out:  # rows so far, so a long audit can be read while it runs
            args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    text = table(rows)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
