"""envforge verify ENV_DIR [--stages ...] [--json] [--write-levels]: model-free verification.

Execution, levels and reliability (pipeline/verify/), all in the sandbox. Prints the verdict
and the figures of each stage (or, with --json, {"accepted", "stage", "reason", "stages"}),
writes the same to the folder's verification.json, and exits 0 when accepted, 1 when rejected.
Given models, the model-driven forms follow (pipeline/verify/models.py, which `generate` uses
too): a short ReAct rollout (`--model`) and the differential test of a weaker against a stronger
model (`--agent-models`).
"""
from __future__ import annotations

import json
import sys

from pipeline import layout
from pipeline.api.verify import VerifyJob, VerifyOptions
from pipeline.commands._flags import command, env_dir
from pipeline.commands._run import print_cost_summary
from pipeline.kinds import (
    DifferentialFigures,
    ExecutionFigures,
    LevelsFigures,
    ReactFigures,
    ReliabilityFigures,
    StageFigures,
)
from pipeline.verify import bounds_text, claims

DESCRIPTION = """Random and planner rollouts on every level; 10 + 5 distinct valid generated levels with a certified
max reward each (validator bound and search witness); a random agent against the search planner.
Writes verification.json and level_max_rewards.json (for the levels in the folder). Exit 0 when
accepted, 1 when rejected."""


def register(subparsers) -> None:
    command(subparsers, "verify", run, VerifyOptions, description=DESCRIPTION,
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
    for stage, figures in result.stages.to_dict().items():
        print(f"{stage}: {_summary(getattr(result.stages, stage, None), figures)}")
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


def _summary(f, shown: dict) -> str:
    """A stage's figures in a line (`shown`: as written, for figures of a stage this envforge does not know)."""
    if isinstance(f, ExecutionFigures):
        return (f"{f.episodes} episodes ({f.steps} steps) on {f.levels} levels, planner search {f.planner_nodes} "
                f"nodes, failures {f.failures_by_kind or 'none'}; {_time(f)}")
    if isinstance(f, LevelsFigures):
        return (
            f"{f.seeds_tried} seeds tried, {f.generated_kept} kept, {f.duplicates} duplicates, "
            f"{f.rejected_by_validator} rejected by the validator, {f.unfit} unfit; "
            f"{len(f.levels_scored or [])} levels scored, {f.corrected} max reward(s) corrected; "
            f"search {f.search_nodes} nodes in {f.search_seconds:g}s"
            + (f" ({f.nodes_per_second:,} nodes/s)" if f.nodes_per_second else "")
            + f"; {len(f.exact_levels or [])} max reward(s) exact"
            + (f"; {len(f.lower_bounds)} only a lower bound ({_why_lower(f)}"
               f"{bounds_text(f.gaps or {}, f.no_upper_bound or {})})" if f.lower_bounds else "")
            + (f"; {len(f.unknown_maxima)} unknown" if f.unknown_maxima else "")
            + (f"; {len(f.cut_by_safety_stop)} cut by the --search-seconds safety stop (load-dependent)"
               if f.cut_by_safety_stop else "")
            + ("; a generator or validator call cut by the --generator-seconds safety stop (load-dependent)"
               if f.generator_safety_stop else "")
            + (f"; validator refuted on {len(f.validator_refuted)} level(s) (a replayed witness scores where "
               f"it rejects)" if f.validator_refuted else "")
            + f"; {_time(f)}"
        )
    if isinstance(f, ReactFigures):
        return (f"ReAct rollout with {f.model}: {f.steps or 0} step(s) on {f.level}, stopped: {f.stop_reason}, "
                f"reward {f.total_reward}")
    if isinstance(f, DifferentialFigures):
        return (f"{f.weak} {f.weak_normalized} vs {f.strong} {f.strong_normalized} normalized over {f.runs} run(s) "
                f"of {f.levels} level(s)")
    if isinstance(f, ReliabilityFigures):
        return (f"random agent {'?' if f.random_normalized is None else f.random_normalized} vs planner "
                f"{'?' if f.planner_normalized is None else f.planner_normalized} normalized (margin {f.margin:g}), "
                f"{f.episodes} episodes; {_time(f)}")
    return _time(f) if isinstance(f, StageFigures) else json.dumps(shown)[:200]


def _why_lower(f: LevelsFigures) -> str:
    """Why a search ended short of a proof: its budget ran out, or it stopped on reaching a claim."""
    at_claim, spent = len(f.stopped_at_claim or []), len(f.lower_bounds) - len(f.stopped_at_claim or [])
    claim = "the search stopped on reaching the validator's or shipped claim, which proves nothing"
    if not at_claim:
        return "search budget spent"
    return claim if not spent else f"search budget spent on {spent}; {claim} on {at_claim}"


def _time(f) -> str:
    return f"{f.wall_seconds:g}s wall, {f.cpu_seconds:g}s CPU"
