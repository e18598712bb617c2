"""envforge evaluate ENV_DIR… --agent A [--model SPEC] [--runs N] [--split S] [--max-levels N]
[--concurrency N] [--out DIR] [--resume] [--json]: score an agent on environments (AutoEnv §5, Table 3).

Writes episodes.jsonl, episodes.csv, trajectories/, report.md, summary.json and plots to --out;
prints the per-environment means (or, with --json, {"envs": {...}, "overall": {...}}).
An --out that already holds episodes is refused unless --resume is given (RESUME_HELP).
Exit 0; 1 when some episode's model call failed; 3 when a budget cap stopped the run.
"""
from __future__ import annotations

import asyncio
import json
import sys

from pipeline.api.evaluate import EvaluateOptions, Evaluation, execute, prepare
from pipeline.api.probe import NO_MODEL_AGENTS, evaluate_probes, read_probe_items, write_probe_report
from pipeline.commands._flags import (
    add_executor_arguments,
    add_llm_arguments,
    add_option,
    add_run_arguments,
    add_skin_argument,
)
from pipeline.commands._run import EXIT_BUDGET_EXCEEDED, EXIT_MODEL_FAILED, print_cost_summary, run_with_client
from pipeline.evaluate.records import NO_MODEL

RESUME_HELP = ("continue the evaluation in --out, or add another agent, model or split to it: a recorded episode is "
               "reused only when its environment, level, max reward, split and settings all match this run; the "
               "others run again, and the command says how many and why. Without --resume, an --out that "
               "already holds episodes is refused (as generate and learn refuse an --out holding a run)")
AGENT_HELP = ("react (AutoEnv's ReAct agent: reasoning in <thinking_memory>, one action in <action>), "
              "tools (each action a native tool call with typed parameters), learned:PATH (the best candidate of "
              "envforge learn, PATH its exported folder; learned agent code runs in the sandbox), random, planner "
              "(search over snapshots in the sandbox; no model), or your own agent as MODULE:ATTR or "
              "path/file.py:ATTR: a class (or object, or function) with run(env, env_info), sync or async, as in "
              "the AutoEnv benchmark. "
              "YOUR AGENT RUNS INSIDE THE ENVFORGE PROCESS, unsandboxed, because you chose to run it; the "
              "environment it steps still runs in the sandbox; --model then only labels its records (default: react)")


def register(subparsers) -> None:
    O = EvaluateOptions  # noqa: N806 - every default below is its field's
    p = subparsers.add_parser(
        "evaluate", help="score an agent on environments: normalized reward, Table-3 report, plots",
        description="Run an agent on every level of each environment, --runs times, concurrently, each environment "
                    "step in a sandbox worker. Normalized reward = total / the level's certified max reward "
                    "(level_max_rewards.json), clipped at 1. --resume continues an evaluation in --out, reusing only "
                    "the episodes recorded with the same environment, level, split and settings.")
    p.add_argument("env_dirs", nargs="*", metavar="ENV_DIR",
                   help="environment folders, or folders holding them (e.g. generated_envs/reference)")
    p.add_argument("--probes", metavar="FILE",
                   help="score --agent (random, oracle, react, tools) on derived world-model test items "
                        "(envforge probe) instead of playing episodes; the items name their environments")
    add_skin_argument(p, O, "; the agent label becomes AGENT@NAME")
    add_option(p, O, "agent", metavar="AGENT", help=AGENT_HELP)
    add_option(p, O, "agent_name", metavar="NAME",
               help="how records and reports name the agent (default: the built-in name, or for your own agent "
                    "FILESTEM:ATTR or MODULE:ATTR, never a path)")
    add_option(p, O, "runs", help="runs per level (default %(default)s, as in the paper)")
    add_option(p, O, "split", help="levels/ (test, default) or val_levels/ (val)")
    add_option(p, O, "max_levels", metavar="N", help="only the first N levels of each environment")
    add_run_arguments(p, O, jobs="episodes", resume_help=RESUME_HELP,
                      out_help="output folder (default ./%(default)s); several agents and models may share one")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    g = p.add_argument_group("episode limits (0 turns one off; the random agent plays every step, as verify's "
                             "reliability baseline does, so only --max-steps and --episode-seconds apply to it)")
    add_option(
        g, O, "max_steps", metavar="N", help="turns per episode (default: the environment's termination.max_steps)"
    )
    add_option(g, O, "invalid_action_streak", metavar="N",
               help="stop after N invalid actions in a row (default %(default)s)")
    add_option(g, O, "format_error_streak", metavar="N",
               help="stop after N replies in a row that hold no action (default %(default)s)")
    add_option(
        g, O, "loop_visits", metavar="N", help="stop when the same state comes back N times (default %(default)s)"
    )
    add_option(g, O, "stagnation_steps", metavar="N",
               help="stop after N steps with no new state and no reward (default %(default)s)")
    add_option(g, O, "episode_seconds", metavar="S",
               help=f"stop an episode after S seconds of wall clock, model calls included; every agent "
                    f"(default {O.episode_seconds:g})")
    add_option(g, O, "run_seconds", metavar="S",
               help=f"start no episode after S seconds of wall clock (default {O.run_seconds:g})")
    a = p.add_argument_group("agents")
    add_option(a, O, "history", metavar="N", help="recent turns shown to react/tools each step (default %(default)s)")
    add_option(a, O, "max_tokens", metavar="N", help="output tokens per model call (default %(default)s)")
    add_option(a, O, "temperature", metavar="T", help="sampling temperature (default: the provider's)")
    add_option(a, O, "planner_nodes", metavar="N",
               help="planner search budget in nodes (environment steps): the same scores on an idle and a busy "
                    "machine (default %(default)s)")
    add_option(a, O, "planner_seconds", metavar="S",
               help="wall-clock safety stop of one planner search, not a budget: a plan it cuts is labelled in "
                    f"the trajectory's thoughts (default {O.planner_seconds:g})")
    add_option(a, O, "call_seconds", metavar="S",
               help=f"wall-clock limit of one environment reset or step in the sandbox (default {O.call_seconds:g})")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


EXIT_ENV_FAILED = 1  # episodes ended in env_error or agent_error: code failed, not the model's play


def _cause(detail: str) -> str:
    """A failed episode's cause on one line: its first line, and where it was raised when known."""
    lines = [line.strip() for line in (detail or "").splitlines() if line.strip()]
    if not lines:
        return "no detail"
    where = [line.split(", in ")[0] for line in lines if line.startswith("File ")]
    return lines[0][:300] + (f" ({where[-1]})" if where and where[-1] not in lines[0] else "")


def run(args) -> int:
    options = EvaluateOptions.from_args(args)
    if args.probes:
        return _run_probes(args.probes, options, args.json)
    job = prepare(args.env_dirs, options)
    try:
        result = asyncio.run(execute(job))
    finally:
        if job.client is not None:
            print_cost_summary(job.client, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        _print_text(result)
    outcome = result.outcome
    if outcome.budget_message:
        print(
            f"envforge evaluate: {outcome.budget_message.partition(': ')[2]} "
            f"({outcome.not_started} episode(s) not started; re-run with the same --out and --resume to finish)",
            file=sys.stderr,
        )
        return EXIT_BUDGET_EXCEEDED
    failed = sum(r.stop_reason == "model_error" for r in outcome.finished)
    if failed:
        print(f"envforge evaluate: {failed} episode(s) ended on a failed model call (left out of the scores; "
              f"re-run with the same --out and --resume to retry them)", file=sys.stderr)
        return EXIT_MODEL_FAILED
    for reason, what in (("env_error", "the environment failed (env_error, left out of the scores)"),
                         ("invalid_reward", "the environment's rewards were not finite numbers (invalid_reward, "
                                            "left out of the scores)"),
                         ("agent_error", "the agent's own code raised (agent_error, scored as played)")):
        failed_episodes = [r for r in outcome.finished if r.stop_reason == reason]
        if failed_episodes:
            first = failed_episodes[0]
            print(f"envforge evaluate: {len(failed_episodes)} episode(s) ended because {what}; e.g. {first.env} on "
                  f"{first.level}: {_cause(first.stop_detail)}", file=sys.stderr)
            return EXIT_ENV_FAILED
    return 0


def _run_probes(probes: str, options: EvaluateOptions, as_json: bool) -> int:
    """`envforge evaluate --probes FILE --agent A`: A (random, oracle/planner, or a model agent) on the
    items; prints the table (or JSON with --json) and writes <out>/probes-<agent>.json and .md."""
    items = read_probe_items(probes)

    def finish(report) -> int:
        write_probe_report(report, options.out)
        print(json.dumps(report.record().to_dict(), indent=2) if as_json else report.table())
        return 0

    if options.agent in NO_MODEL_AGENTS:
        return finish(asyncio.run(evaluate_probes(items, options)))

    async def work(client) -> int:
        return finish(await evaluate_probes(items, options, client))

    return run_with_client(options.llm, "evaluate", work, json=as_json)


def _print_text(result: Evaluation) -> None:
    outcome, envs, overall = result.outcome, result.envs, result.overall
    label = result.agent if result.model == NO_MODEL else f"{result.agent} {result.model}"
    print(f"evaluate: {label} on {result.environments} environment(s), split {result.split}, {result.runs} run(s): "
          f"{outcome.planned} episode(s), {outcome.skipped} already done, {len(outcome.finished)} run now")
    if outcome.rerun:
        print(f"  run again, their records in {result.out} no longer matching: "
              + "; ".join(f"{why} ({n})" for why, n in sorted(outcome.rerun.items())))
    width = max(len(n) for n in envs) if envs else 0
    for name, s in envs.items():
        score = "–" if s.mean_normalized is None else f"{s.mean_normalized * 100:.2f}%"
        std = f" ±{s.std * 100:.2f}" if s.std is not None else ""
        stops = ", ".join(f"{k} {v}" for k, v in sorted(s.stop_reasons.items(), key=lambda kv: -kv[1]))
        extra = f", {s.clipped} clipped" if s.clipped else ""
        extra += f", {s.null_normalized} without a max reward" if s.null_normalized else ""
        steps = "–" if s.mean_steps is None else f"{round(s.mean_steps, 2):g}"
        print(f"  {name:<{width}}  mean normalized {score}{std} over {s.episodes} episode(s), "
              f"{steps} steps{extra}; stop: {stops}")
    if overall.get("mean_normalized") is not None:
        std = f" (±{overall['std'] * 100:.2f})" if overall.get("std") is not None else ""
        print(
            f"overall: {overall['mean_normalized'] * 100:.2f}%{std}, {round(overall['mean_steps'], 2):g} steps"
            f" per episode, "
            f"{overall['clipped']} clipped, ${overall['dollars']:.4f}"
        )
    for note in result.mixed:
        print(f"note: {note}")
    print("written: " + ", ".join(str(f) for f in result.files))
