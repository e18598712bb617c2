"""Benchmark of `envforge generate`: the pipeline's own overhead per theme, and wall time for N
themes at a fixed simulated model latency against the ideal.

    python benchmarks/generate_bench.py [--themes 6] [--latency 0.2]

Each theme is the corridor environment of the test suite played by a scripted model (7 model
calls: design, dsl, three code steps, two repair steps for every second theme), so every stage
runs for real: the DSL check, the sandboxed `check`, verification with its searches, packaging.
The latency is simulated in this benchmark's own process by delaying every model answer
(asyncio.sleep before the replayed response), never in the product code.

Overhead per theme = wall time at zero latency / themes (at concurrency 1).
Ideal wall time at latency L and concurrency C = overhead of the whole run at C plus
(model calls x L) / C: model waits perfectly overlapped, nothing else slowed down.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envforge.pipeline.testing import replay_kit  # noqa: E402

BOOT = """
import asyncio, sys
from envforge.pipeline.llm import client as c
latency = float(sys.argv[1])
original = c.LLMClient.complete
async def slow(self, *a, **k):
    await asyncio.sleep(latency)
    return await original(self, *a, **k)
c.LLMClient.complete = slow
from envforge.pipeline.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run(workdir: Path, themes: Path, replay: Path, latency: float, concurrency: int, tag: str) -> tuple[float, dict]:
    out = workdir / f"out_{tag}"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", BOOT, str(latency), "generate", "--themes", str(themes), "--out",
                           str(out), "--provider", "replay", "--replay", str(replay), "--levels", "6",
                           "--concurrency", str(concurrency), "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"generate failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--themes", type=int, default=6)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envforge-bench-") as tmp:
        tmp = Path(tmp)
        replay = tmp / "replay"
        lines = []
        for i in range(args.themes):
            name = f"t{i}"
            bug = {"env_main.py": ("step = 1 if", "step = 1 / 0 if")} if i % 2 else None
            replay_kit.record_corridor(replay, name, replace=bug)
            lines.append(f"- {{name: {name}, theme: corridor {i}}}")
        themes = tmp / "themes.yaml"
        themes.write_text("\n".join(lines) + "\n")

        base, summary = run(tmp, themes, replay, 0.0, 1, "overhead")
        calls = summary["model_calls"]["made"]
        per_theme = base / args.themes
        print(f"themes: {args.themes}   model calls: {calls}   accepted: {len(summary['accepted'])}")
        print(
            f"pipeline overhead (zero model latency, concurrency 1): {base:.2f} s in all, {per_theme:.2f} s per theme\n"
        )
        print(f"simulated model latency {args.latency * 1000:.0f} ms per call")
        print(f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ideal/wall':>10}")
        for c in (1, 2, args.themes):
            overhead_c, _ = run(tmp, themes, replay, 0.0, c, f"o{c}")
            wall, _ = run(tmp, themes, replay, args.latency, c, f"l{c}")
            ideal = overhead_c + calls * args.latency / c
            print(f"{c:>11} {wall:>8.2f} {ideal:>8.2f} {ideal / wall:>10.2f}")


if __name__ == "__main__":
    main()
