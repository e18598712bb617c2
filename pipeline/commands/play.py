"""envforge play ENV_DIR [--level ID | --seed N] [--actions FILE]: a person plays in the terminal."""
from __future__ import annotations

from pipeline.api.play import HELP, PlayOptions, play
from pipeline.commands._flags import add_option


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "play", help="play an environment in the terminal (or replay a file of actions)",
        description="Play one level of an environment, in the sandbox. " + HELP)
    p.add_argument("env_dir", metavar="ENV_DIR")
    which = p.add_mutually_exclusive_group()
    add_option(which, PlayOptions, "level",
               help="level id: level_01, levels/level_01.yaml or val_levels/level_11 (default: the first test level)")
    add_option(which, PlayOptions, "seed", help="play a level generated from this seed instead")
    add_option(p, PlayOptions, "actions", metavar="FILE",
               help="replay actions from FILE, one per line, non-interactively")
    p.set_defaults(func=run)


def run(args) -> int:
    return play(args.env_dir, PlayOptions.from_args(args))
