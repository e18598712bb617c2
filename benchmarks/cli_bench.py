"""Command start-up: the CPU a fresh `envforge COMMAND` spends before it does any work.

    . .venv/bin/activate && python benchmarks/cli_bench.py [--repeat 5]

Every `envforge` run pays it once, and the test suite pays it for each of the ~470 commands its
tests run as subprocesses (tests/cli_kit.py's envforge()). For each command this script starts
`--repeat` fresh interpreters that import what the command line imports for that command (the
parser with only that command's module, then the command's library module, as a run does before
it touches an environment) and exits; it prints the median CPU seconds (user + system, from the
children's rusage) and wall seconds of one start, beside a bare `python -c pass`. CPU is the figure
to compare on a shared machine: wall grows with the load, CPU much less.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["generate", "check", "doctor", "play", "dsl", "verify", "probe", "reskin", "evaluate", "learn",
            "review", "serve", "export"]


def program(command: str | None) -> str:
    if command is None:
        return "pass"
    library = f"envforge.pipeline.api.{command}"
    extra = f"import {library}\n" if importlib.util.find_spec(library) else ""
    return f"from envforge.pipeline.cli import build_parser\nbuild_parser([{command!r}])\n{extra}"


def one_start(code: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one interpreter running `code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env=dict(os.environ, ENVFORGE_PLOTS="off"))
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="starts per command (median reported)")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'command':<12}{'CPU s':>8}{'wall s':>9}")
    for command in [None, *COMMANDS]:
        runs = [one_start(program(command)) for _ in range(args.repeat)]
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        print(f"{command or '(python)':<12}{cpu:>8.2f}{wall:>9.2f}")


if __name__ == "__main__":
    main()
