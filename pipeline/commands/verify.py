"""envforge verify ENV_DIR [--stages ...] [--json] [--write-levels]: model-free verification.

Execution, levels and reliability (pipeline/verify/), all in the sandbox. Prints the verdict
and the figures of each stage (or, with --json, {"accepted", "stage", "reason", "stages"}),
writes the same to the folder's verification.json, and exits 0 when accepted, 1 when rejected.
Given models, the model-driven forms follow (pipeline/verify/models.py, which `generate` uses
too): a short ReAct rollout (`--model`) and the differential test of a weaker against a stronger
model (`--agent-models`).
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from pipeline import manifest
from pipeline import records as files
from pipeline import layout
from pipeline.errors import UserError, not_a_folder
from pipeline.llm.cli_args import add_llm_arguments, client_from_args, print_cost_summary
from pipeline.llm.config import PROVIDERS
from pipeline.sandbox.outside.executor import add_executor_arguments
from pipeline.verify import STAGES, Options, verify_env
from pipeline.verify import claims
from pipeline.verify.models import ModelChecks, verify_with_models
from pipeline.argtypes import COUNT, SECONDS, SEED, number, out_file


def register(subparsers) -> None:
    defaults = Options()
    p = subparsers.add_parser(
        "verify", help="verify an environment folder: execution, levels, reliability (model-free)",
        description="Random and planner rollouts on every level; 10 + 5 distinct valid generated levels with a "
                    "certified max reward each (validator bound and search witness); a random agent against the "
                    "search planner. Writes verification.json and level_max_rewards.json (for the levels in the "
                    "folder). Exit 0 when accepted, 1 when rejected.")
    p.add_argument("env_dir", metavar="ENV_DIR", help="environment folder (generated, hand-written or AutoEnv format)")
    p.add_argument("--stages", default=",".join(STAGES),
                   help=f"comma-separated stages to run, in order (default {','.join(STAGES)})")
    p.add_argument("--json", action="store_true", help="print the verdict and figures as JSON")
    p.add_argument("--write", action="store_true",
                   help="write verification.json, manifest.json and level_max_rewards.json into the folder "
                        "(default only for folders envforge made: a manifest.json with an origin)")
    p.add_argument("--out", metavar="FILE", type=out_file,
                   help="also write the verdict and figures (the --json document) to FILE")
    p.add_argument("--write-levels", action="store_true",
                   help="replace levels/ and val_levels/ by the generated set (implies --write; default: verify "
                        "it in the sandbox only and keep the folder's levels)")
    p.add_argument("--margin", type=number(0.0, 1.0), default=defaults.margin,
                   help=f"reliability: reject when the random agent's mean normalized reward is >= the planner's "
                        f"minus this (default {defaults.margin})")
    p.add_argument("--search-nodes", type=COUNT, default=defaults.search_nodes,
                   help=f"search budget per level, in nodes (environment steps) over all its search passes: the "
                        f"same maxima and verdicts on an idle and a busy machine (default {defaults.search_nodes})")
    p.add_argument("--search-seconds", type=SECONDS, default=defaults.search_seconds,
                   help=f"wall-clock safety stop of one search, not a budget: a level it cuts is labelled in the "
                        f"result, since its figures then depend on machine load (default {defaults.search_seconds:g})")
    p.add_argument("--random-episodes", type=COUNT, default=defaults.random_episodes,
                   help=f"random-agent episodes per level (default {defaults.random_episodes})")
    p.add_argument("--call-seconds", type=SECONDS, default=defaults.limits.call_seconds,
                   help=f"wall-clock limit of one reset or step; longer is a hang (default "
                        f"{defaults.limits.call_seconds:g})")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the random agents (default 0)")
    p.add_argument("--budget", type=SECONDS, default=defaults.budget_seconds, metavar="SECONDS",
                   help="wall clock of the model-free stages; past it the environment is rejected with "
                        f"wall_clock (default {defaults.budget_seconds:g}). The model-driven checks below are "
                        "not counted: they are bounded by their step and call limits")
    m = p.add_argument_group("model-driven checks (after the model-free stages; need a provider)")
    m.add_argument("--agent-models", metavar="WEAK,STRONG",
                   help="the differential test: reject when the weaker model's ReAct agent scores at least as high "
                        "as the stronger's in every run")
    m.add_argument("--agent-runs", type=COUNT, default=2, metavar="N", help="runs per model (default 2)")
    m.add_argument("--agent-levels", type=COUNT, default=5, metavar="N", help="test levels each model plays (default 5)")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise UserError(f"--stages: expected some of {','.join(STAGES)}, found {args.stages!r}")
    options = Options(margin=args.margin, search_nodes=args.search_nodes, search_seconds=args.search_seconds,
                      random_episodes=args.random_episodes, write_levels=args.write_levels,
                      write=args.write or args.write_levels or made_by_envforge(Path(args.env_dir)), seed=args.seed,
                      budget_seconds=args.budget, limits=dataclasses.replace(Options().limits, call_seconds=args.call_seconds),
                      progress=lambda what: print(f"verify {args.env_dir}: {what}", file=sys.stderr, flush=True))
    pair = model_pair("--agent-models", args.agent_models)
    _require_env_folder(args.env_dir)
    result = verify_env(args.env_dir, stages, options)
    if result.accepted and (args.model or pair):
        checks = model_checks(args, args.model, pair, args.agent_runs, args.agent_levels)
        try:
            asyncio.run(_verify_with_models(args.env_dir, checks, result, options.write))
        finally:
            for client in checks.clients():
                print_cost_summary(client, file=sys.stderr if args.json else sys.stdout)
    if args.out:
        write_report(Path(args.out), result.to_dict())
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0 if result.accepted else 1
    for stage, figures in result.stages.items():
        print(f"{stage}: {_summary(stage, figures)}")
    shipped_claims = (result.stages.get("reliability") or {}).get("claims") or \
        (result.stages.get("levels") or {}).get("claims")
    if shipped_claims:
        print(f"claimed max rewards ({layout.LEVEL_MAX_REWARDS}): {claims.summary(shipped_claims)}")
    if not options.write:
        print(f"read-only: nothing written into {args.env_dir} (--write to record the results there)")
    if result.accepted:
        if (result.stages.get("reliability") or {}).get("inconclusive"):
            print(f"note: reliability inconclusive: {result.stages['reliability']['inconclusive']}")
        print(f"accepted: {args.env_dir}")
        return 0
    print(f"REJECTED at {result.stage}: {result.reason}")
    return 1


def _require_env_folder(path: str) -> None:
    """A path that holds no environment at all is a usage error (exit 2), not a rejection, and
    nothing is written into it; a folder missing only some files is an environment with a flaw."""
    env = layout.EnvDir.at(path)
    if not env.path.is_dir():
        raise UserError(f"{path}: expected an environment folder, found {not_a_folder(env.path)}")
    if len(env.missing_required()) == len(layout.REQUIRED_FILES):
        raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}), found neither file")


def model_pair(flag: str, value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    pair = tuple(s.strip() for s in value.split(","))
    if len(pair) != 2 or not all(pair):
        raise UserError(f"{flag}: expected WEAK,STRONG (two model specs), found {value!r}")
    return pair


def model_checks(args, rollout: str | None, pair: tuple[str, str] | None, runs: int, levels: int) -> ModelChecks:
    """Clients for the model-driven forms, from the command's provider flags (a UserError when a
    provider is not configured, before any work)."""
    def client(spec: str):
        # Replayed generation may be verified by live models: a spec naming its provider ("openai/x")
        # then uses it. (Under a live --provider a slashed name is that provider's, as on OpenRouter.)
        named = args.provider == "replay" and "/" in spec and spec.split("/", 1)[0] in PROVIDERS
        return client_from_args(argparse.Namespace(**{**vars(args), "model": spec,
                                                      **({"provider": None, "replay": None} if named else {})}))

    weak, strong = (client(pair[0]), client(pair[1])) if pair else (None, None)
    first = strong if pair and rollout == pair[1] else (client(rollout) if rollout else None)
    return ModelChecks(rollout=first, weak=weak, strong=strong, runs=runs, levels=levels)


async def _verify_with_models(env_dir: str, checks: ModelChecks, result, write: bool) -> None:
    try:
        await verify_with_models(env_dir, checks, result, write)
    finally:
        for client in checks.clients():
            await client.aclose()


def made_by_envforge(env_dir: Path) -> bool:
    """A folder envforge made (generate, or a reference env) has a manifest.json naming its origin."""
    return bool(manifest.read(env_dir).origin)


def write_report(path: Path, report: dict) -> None:
    try:
        files.write_json(path, "verify_report", report)
    except OSError as e:
        raise UserError(f"--out: expected a file envforge can write, found {e.strerror}: {path}") from None


def _summary(stage: str, f: dict) -> str:
    time = f"{f.get('wall_seconds', 0):g}s wall, {f.get('cpu_seconds', 0):g}s CPU"
    if stage == "execution":
        return (f"{f.get('episodes', 0)} episodes ({f.get('steps', 0)} steps) on {f.get('levels', 0)} levels, "
                f"planner search {f.get('planner_nodes', 0)} nodes, failures {f.get('failures_by_kind') or 'none'}; {time}")
    if stage == "levels":
        return (f"{f.get('seeds_tried', 0)} seeds tried, {f.get('generated_kept', 0)} kept, {f.get('duplicates', 0)} "
                f"duplicates, {f.get('rejected_by_validator', 0)} rejected by the validator, {f.get('unfit', 0)} unfit; "
                f"{len(f.get('levels_scored') or [])} levels scored, {f.get('corrected', 0)} max reward(s) corrected; "
                f"search {f.get('search_nodes', 0)} nodes in {f.get('search_seconds', 0):g}s"
                + (f" ({f['nodes_per_second']:,} nodes/s)" if f.get("nodes_per_second") else "")
                + f"; {len(f.get('exact_levels') or [])} max reward(s) exact"
                + (f"; {len(f['lower_bounds'])} only a lower bound (search budget spent)" if f.get("lower_bounds") else "")
                + (f"; {len(f['unknown_maxima'])} unknown" if f.get("unknown_maxima") else "")
                + (f"; {len(f['cut_by_safety_stop'])} cut by the --search-seconds safety stop (load-dependent)"
                   if f.get("cut_by_safety_stop") else "")
                + (f"; validator refuted on {len(f['validator_refuted'])} level(s) (a replayed witness scores where "
                   f"it rejects)" if f.get("validator_refuted") else "") + f"; {time}")
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
