"""envforge levels ENV_DIR --n N --band easy|medium|hard|LO..HI [--seed S] --out DIR [--json]

Levels from the environment's own generator (in the sandbox), validated, certified, profiled and
de-duplicated by verify's path, the first N in seed order whose difficulty score lies in the band,
written with the environment as a new folder: those levels are its test split, with their certified
maxima and profiles in level_max_rewards.json (pipeline/api/levels.py). Exit 0 when written, 1 when
the generator does not reach the band (the message names the scores it reached), 2 on bad input.
"""
from __future__ import annotations

import json
import sys

from envforge.pipeline.api.levels import BandUnreachable, LevelsJob, LevelsOptions
from envforge.pipeline.commands._flags import command, env_dir

DESCRIPTION = """Levels from the environment's generator by seed (SEED+1, SEED+2, ...), each validated, its max
certified and its difficulty profiled by verify (pipeline/difficulty.py: easy 0..39, medium 40..59, hard 60..100 of
the score), duplicates dropped; the first N in the band become the test split of a copy of the environment in DIR,
verified there. The same arguments give the same folder. Exit 1 when the generator does not reach the band."""


@command("levels", LevelsOptions, description=DESCRIPTION, json="print the level set as JSON",
         help="make N levels in a difficulty band from an environment's generator, as a new environment folder",
         arguments=[env_dir(" whose generator makes the levels")])
def run(args, options: LevelsOptions) -> int:
    job = LevelsJob(args.env_dir, options,
                    progress=lambda what: print(f"levels {args.env_dir}: {what}", file=sys.stderr, flush=True))
    try:
        made = job.run()
    except BandUnreachable as e:
        print(f"UNREACHABLE: {e}")
        return 1
    if args.json:
        print(json.dumps({"out": str(made.out), "band": made.band, "scores": list(made.scores),
                          "levels": made.final_scores, "seeds": [c.seed for c in made.chosen],
                          "candidates": made.candidates, "seeds_tried": list(made.seeds),
                          "reached": list(made.reached), "outside_band": made.outside}, indent=2))
    else:
        print(made.summary())
    return 0
