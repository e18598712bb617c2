"""envforge play ENV_DIR [--level ID | --seed N] [--actions FILE]: a person plays in the terminal."""
from __future__ import annotations

from envforge.pipeline.api.play import HELP, PlayOptions, play
from envforge.pipeline.commands._flags import command, env_dir


@command("play", PlayOptions, without=["executor"], arguments=[env_dir()],
         help="play an environment in the terminal (or replay a file of actions)",
         description="Play one level of an environment, in the sandbox. " + HELP)
def run(args, options: PlayOptions) -> int:
    return play(args.env_dir, options)
