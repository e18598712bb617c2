"""The ReAct reply parser (pipeline/evaluate/react.py) on adversarial replies: CPU seconds of
parse_action plus thought_of, per reply shape and size.

    . .venv/bin/activate && python benchmarks/react_parser_bench.py [--sizes 10000,130000,10000000]

Sizes up to react.MAX_REPLY_CHARS are parsed; a longer reply is refused as a format error before
any parsing. Linear parsing shows as CPU time growing with the size, not its square (issue 22:
before, 100,000 characters of "<action>" took 7 s and 10 MB took 83 s or more).
"""
from __future__ import annotations

import argparse
import time

from envforge.pipeline.evaluate import react

SHAPES = {
    "open action tags": "<action>",
    "open thought tags": "<thinking_memory>",
    "small dictionaries": "{'a': 1} ",
    "open braces": "{",
    "prose": "word ",
    "action blocks": "<action>{\"action\": \"wait\"}</action>",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=f"10000,{react.MAX_REPLY_CHARS},10000000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"MAX_REPLY_CHARS {react.MAX_REPLY_CHARS:,}")
    print(f"{'shape':<20} " + " ".join(f"{size:>12,}" for size in sizes) + "   (CPU seconds)")
    for name, unit in SHAPES.items():
        row = []
        for size in sizes:
            text = (unit * (size // len(unit) + 1))[:size]
            start = time.process_time()
            try:
                react.parse_action(text)
            except react.FormatError:
                pass
            react.thought_of(text)
            row.append(time.process_time() - start)
        print(f"{name:<20} " + " ".join(f"{t:>12.4f}" for t in row), flush=True)


if __name__ == "__main__":
    main()
