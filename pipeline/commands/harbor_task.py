"""In a Harbor task's image (envforge export harbor): `python -m envforge.pipeline.commands.harbor_task
play [ACTION…] [--show]` (what envforge-play runs) and `... score` (what tests/test.sh runs). Not an
`envforge` command: the task's scripts call it; pipeline.api.harbor does the work."""
from __future__ import annotations

import argparse
import sys

from envforge.pipeline.api.harbor import REWARD, play, score
from envforge.pipeline.errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envforge.pipeline.commands.harbor_task",
                                     description="Play or score this Harbor task's level (in its image).")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("play", help="one action (as `envforge play` reads one: `move north`, JSON)")
    p.add_argument("action", nargs="*", help="the action; its words are joined by spaces")
    p.add_argument("--show", action="store_true", help="print what the environment shows now, without acting")
    sub.add_parser("score", help=f"replay the episode and write its normalized reward to {REWARD}")
    args = parser.parse_args(argv)
    try:
        if args.command == "score":
            return score()
        if args.show and args.action:
            parser.error("expected an action or --show, found both")
        return play(" ".join(args.action) if args.action else None)
    except UserError as e:
        print(f"envforge: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
