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
from pipeline.commands._flags import add_executor_arguments, add_llm_arguments, add_option
from pipeline.commands._run import print_cost_summary
from pipeline.verify import bounds_text, claims


def register(subparsers) -> None:
    O = VerifyOptions  # noqa: N806 - every default below is its field's
    p = subparsers.add_parser(
        "verify", help="verify an environment folder: execution, levels, reliability (model-free)",
        description="Random and planner rollouts on every level; 10 + 5 distinct valid generated levels with a "
                    "certified max reward each (validator bound and search witness); a random agent against the "
                    "search planner. Writes verification.json and level_max_rewards.json (for the levels in the "
                    "folder). Exit 0 when accepted, 1 when rejected.")
    p.add_argument("env_dir", metavar="ENV_DIR", help="environment folder (generated, hand-written or AutoEnv format)")
    add_option(p, O, "stages", help=f"comma-separated stages to run, in order (default {O.stages})")
    p.add_argument("--json", action="store_true", help="print the verdict and figures as JSON")
    add_option(p, O, "write",
               help="write verification.json, manifest.json and level_max_rewards.json into the folder "
                    "(default only for folders envforge made: a manifest.json with an origin)")
    add_option(p, O, "out", metavar="FILE", help="also write the verdict and figures (the --json document) to FILE")
    add_option(p, O, "write_levels",
               help="replace levels/ and val_levels/ by the generated set (implies --write; default: verify "
                    "it in the sandbox only and keep the folder's levels)")
    add_option(p, O, "margin",
               help="reliability: reject when the random agent's mean normalized reward is >= the planner's "
                    "minus this (default %(default)s)")
    add_option(p, O, "search_nodes",
               help="search budget per level, in nodes (environment steps) over all its search passes: the "
                    "same maxima and verdicts on an idle and a busy machine (default %(default)s)")
    add_option(p, O, "search_seconds",
               help=f"wall-clock safety stop of one search, not a budget: a level it cuts is labelled in the "
                    f"result, since its figures then depend on machine load (default {O.search_seconds:g})")
    add_option(p, O, "random_episodes", help="random-agent episodes per level (default %(default)s)")
    add_option(p, O, "call_seconds",
               help=f"wall-clock limit of one call of the environment's code (its load, a reset, a step); longer "
                    f"is a hang (default {O.call_seconds:g})")
    add_option(p, O, "generator_seconds",
               help=f"wall-clock safety stop of one call of the environment's generator or validator, not a "
                    f"call limit (they may search a level's whole space, slower on a busy machine); a call it "
                    f"cuts is named in the verdict as load-dependent (default {O.generator_seconds:g})")
    add_option(p, O, "seed", help="seed of the random agents (default %(default)s)")
    add_option(p, O, "budget", metavar="SECONDS",
               help="wall clock of the model-free stages; past it the environment is rejected with "
                    f"wall_clock (default {O.budget:g}). The model-driven checks below are "
                    "not counted: they are bounded by their step and call limits")
    m = p.add_argument_group("model-driven checks (after the model-free stages; need a provider)")
    add_option(m, O, "agent_models", metavar="WEAK,STRONG",
               help="the differential test: reject when the weaker model's ReAct agent scores at least as high "
                    "as the stronger's in every run")
    add_option(m, O, "agent_runs", metavar="N", help="runs per model (default %(default)s)")
    add_option(m, O, "agent_levels", metavar="N", help="test levels each model plays (default %(default)s)")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    job = VerifyJob(args.env_dir, VerifyOptions.from_args(args),
                    progress=lambda what: print(f"verify {args.env_dir}: {what}", file=sys.stderr, flush=True))
    try:
        result = job.run()
    finally:
        for client in job.clients():
            print_cost_summary(client, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0 if result.accepted else 1
    for stage, figures in result.stages.items():
        print(f"{stage}: {_summary(stage, figures)}")
    shipped_claims = (result.stages.get("reliability") or {}).get("claims") or \
        (result.stages.get("levels") or {}).get("claims")
    if shipped_claims:
        print(f"claimed max rewards ({layout.LEVEL_MAX_REWARDS}): {claims.summary(shipped_claims)}")
    if not job.write:
        print(f"read-only: nothing written into {args.env_dir} (--write to record the results there)")
    if result.accepted:
        if (result.stages.get("reliability") or {}).get("inconclusive"):
            print(f"note: reliability inconclusive: {result.stages['reliability']['inconclusive']}")
        print(f"accepted: {args.env_dir}")
        return 0
    print(f"REJECTED at {result.stage}: {result.reason}")
    return 1


def _summary(stage: str, f: dict) -> str:
    time = f"{f.get('wall_seconds', 0):g}s wall, {f.get('cpu_seconds', 0):g}s CPU"
    if stage == "execution":
        return (
            f"{f.get('episodes', 0)} episodes ({f.get('steps', 0)} steps) on {f.get('levels', 0)} levels, "
            f"planner search {f.get('planner_nodes', 0)} nodes, failures {f.get('failures_by_kind') or 'none'}; {time}"
        )
    if stage == "levels":
        return (
            f"{f.get('seeds_tried', 0)} seeds tried, {f.get('generated_kept', 0)} kept, {f.get('duplicates', 0)} "
            f"duplicates, {f.get('rejected_by_validator', 0)} rejected by the validator, {f.get('unfit', 0)} unfit; "
            f"{len(f.get('levels_scored') or [])} levels scored, {f.get('corrected', 0)} max reward(s) corrected; "
            f"search {f.get('search_nodes', 0)} nodes in {f.get('search_seconds', 0):g}s"
            + (f" ({f['nodes_per_second']:,} nodes/s)" if f.get("nodes_per_second") else "")
            + f"; {len(f.get('exact_levels') or [])} max reward(s) exact"
            + (
                f"; {len(f['lower_bounds'])} only a lower bound (search budget spent"
                f"{bounds_text(f.get('gaps') or {}, f.get('no_upper_bound') or {})})"
                if f.get("lower_bounds")
                else ""
            )
            + (f"; {len(f['unknown_maxima'])} unknown" if f.get("unknown_maxima") else "")
            + (
                f"; {len(f['cut_by_safety_stop'])} cut by the --search-seconds safety stop (load-dependent)"
                if f.get("cut_by_safety_stop")
                else ""
            )
            + ("; a generator or validator call cut by the --generator-seconds safety stop (load-dependent)"
               if f.get("generator_safety_stop") else "")
            + (
                f"; validator refuted on {len(f['validator_refuted'])} level(s) (a replayed witness scores where "
                f"it rejects)"
                if f.get("validator_refuted")
                else ""
            )
            + f"; {time}"
        )
    if stage == "execution_react":
        return (f"ReAct rollout with {f.get('model')}: {f.get('steps', 0)} step(s) on {f.get('level')}, "
                f"stopped: {f.get('stop_reason')}, reward {f.get('total_reward')}")
    if stage == "reliability_models":
        return (f"{f.get('weak')} {f.get('weak_normalized')} vs {f.get('strong')} {f.get('strong_normalized')} "
                f"normalized over {f.get('runs')} run(s) of {f.get('levels')} level(s)")
    if stage == "reliability":
        return (f"random agent {f.get('random_normalized', '?')} vs planner {f.get('planner_normalized', '?')} "
                f"normalized (margin {f.get('margin')}), {f.get('episodes', 0)} episodes; {time}")
    return time
