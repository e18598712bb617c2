"""envforge verify ENV_DIR [--stages ...] [--json] [--write-levels]: model-free verification.

Execution, levels and reliability (pipeline/verify/), all in the sandbox. Prints the verdict
and the figures of each stage (or, with --json, {"accepted", "stage", "reason", "stages"}),
writes the same to the folder's verification.json (a folder generate made, or with --write), and
exits 0 when accepted, 1 when rejected.
Given models, the model-driven forms follow (pipeline/verify/models.py, which `generate` uses
too): a short ReAct rollout (`--model`) and the differential test of a weaker against a stronger
model (`--agent-models`).
"""
from __future__ import annotations

import json
import sys

from envforge.pipeline import layout
from envforge.pipeline.api.verify import VerifyJob, VerifyOptions
from envforge.pipeline.commands._flags import command, env_dir
from envforge.pipeline.commands._run import print_cost_summary
from envforge.pipeline.verify import claims

DESCRIPTION = """Random and planner rollouts on every level; 10 + 5 distinct valid generated levels with a certified
max reward each (validator bound and search witness); a random agent against the search planner.
Into a folder envforge generate made, writes verification.json and level_max_rewards.json (for the
levels in the folder); any other folder is judged, not changed, unless --write. Exit 0 when accepted,
1 when rejected."""


@command("verify", VerifyOptions, description=DESCRIPTION,
         json="print the verdict and figures as JSON",
         help="verify an environment folder: execution, levels, reliability (model-free)",
         arguments=[env_dir(" (generated, hand-written or AutoEnv format)")])
def run(args, options: VerifyOptions) -> int:
    job = VerifyJob(args.env_dir, options,
                    progress=lambda what: print(f"verify {args.env_dir}: {what}", file=sys.stderr, flush=True))
    try:
        result = job.run()
    finally:
        for client in job.clients():
            print_cost_summary(client, json=args.json)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0 if result.accepted else 1
    for stage, shown in result.stages.to_dict().items():  # a stage this envforge does not know: as written
        figures = getattr(result.stages, stage, None)
        print(f"{stage}: {figures.summary() if figures is not None else json.dumps(shown)[:200]}")
    rel, levels = result.stages.reliability, result.stages.levels
    shipped_claims = (rel.claims if rel else None) or (levels.claims if levels else None)
    if shipped_claims:
        print(f"claimed max rewards ({layout.LEVEL_MAX_REWARDS}): {claims.summary(shipped_claims)}")
    if not job.write:
        print(f"read-only: nothing written into {args.env_dir} (--write to record the results there)")
    if result.accepted:
        if rel and rel.inconclusive:
            print(f"note: reliability inconclusive: {rel.inconclusive}")
        print(f"accepted: {args.env_dir}")
        return 0
    print(f"REJECTED at {result.stage}: {result.reason}")
    return 1
