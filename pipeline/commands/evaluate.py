"""envforge evaluate ENV_DIR… --agent A [--model SPEC] [--runs N] [--split S] [--max-levels N]
[--concurrency N] [--out DIR] [--resume] [--json]: score an agent on environments (AutoEnv §5, Table 3).

Writes episodes.jsonl, episodes.csv, trajectories/, report.md, summary.json and plots to --out;
prints the per-environment means (or, with --json, {"envs": {...}, "overall": {...}}).
An --out that already holds episodes is refused unless --resume is given (RESUME_HELP,
pipeline/api/evaluate.py).
Exit 0; 1 when some episode's model call failed; 3 when a budget cap stopped the run.
"""
from __future__ import annotations

import asyncio
import json
import sys

from envforge.pipeline.api.evaluate import EvaluateOptions, Evaluation, execute, prepare
from envforge.pipeline.api.probe import NO_MODEL_AGENTS, evaluate_probes, read_probe_items, write_probe_report
from envforge.pipeline.commands._flags import arg, command, env_dirs
from envforge.pipeline.commands._run import EXIT_BUDGET_EXCEEDED, EXIT_MODEL_FAILED, print_cost_summary, run_with_client
from envforge.pipeline.evaluate.records import NO_MODEL

DESCRIPTION = """Run an agent on every level of each environment, --runs times, concurrently, each environment step
in a sandbox worker. Normalized reward = total / the level's certified max reward
(level_max_rewards.json), clipped at 1. --resume continues an evaluation in --out, reusing only the
episodes recorded with the same environment, level, split and settings."""


EXIT_ENV_FAILED = 1  # episodes ended in env_error or agent_error: code failed, not the model's play


def _cause(detail: str) -> str:
    """A failed episode's cause on one line: its first line, and where it was raised when known."""
    lines = [line.strip() for line in (detail or "").splitlines() if line.strip()]
    if not lines:
        return "no detail"
    where = [line.split(", in ")[0] for line in lines if line.startswith("File ")]
    return lines[0][:300] + (f" ({where[-1]})" if where and where[-1] not in lines[0] else "")


@command("evaluate", EvaluateOptions, description=DESCRIPTION, json="print the summary as JSON",
         help="score an agent on environments: normalized reward, Table-3 report, plots",
         arguments=[env_dirs(" (e.g. generated_envs/reference)"),
                    arg("--probes", metavar="FILE",
                        help="score --agent (random, oracle, react, tools) on derived world-model test items "
                             "(envforge probe) instead of playing episodes; the items name their environments")])
def run(args, options: EvaluateOptions) -> int:
    if args.probes:
        return _run_probes(args.probes, options, args.json)
    job = prepare(args.env_dirs, options)
    try:
        result = asyncio.run(execute(job))
    finally:
        if job.client is not None:
            print_cost_summary(job.client, json=args.json)
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
    if overall.get("bands"):
        print("by difficulty band: " + ", ".join(
            f"{band} {'–' if v is None else f'{v * 100:.2f}%'}" for band, v in overall["bands"].items()))
    for note in result.mixed:
        print(f"note: {note}")
    print("written: " + ", ".join(str(f) for f in result.files))
