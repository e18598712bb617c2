"""envforge evaluate ENV_DIR… --agent A [--model SPEC] [--runs N] [--split S] [--max-levels N]
[--concurrency N] [--out DIR] [--resume] [--json]: score an agent on environments (AutoEnv §5, Table 3).

Writes episodes.jsonl, episodes.csv, trajectories/, report.md, summary.json and plots to --out;
prints the per-environment means (or, with --json, {"envs": {...}, "overall": {...}}).
An --out that already holds episodes is refused unless --resume is given (RESUME_HELP).
Exit 0; 1 when some episode's model call failed; 3 when a budget cap stopped the run.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import sys
from pathlib import Path

from pipeline import layout
from pipeline import records as files
from pipeline.errors import UserError, not_a_folder
from learning.export import LEARNED, learned_player
from pipeline.evaluate import EnvTarget, Limits, ModelOptions, display_name, kind_of, make_player, register_prefix
from pipeline.evaluate.records import EPISODES_CSV, EPISODES_JSONL, NO_MODEL, Records
from pipeline.evaluate.report import mixed, plots_wanted, rounded, settings_key, summarize, write_report
from pipeline.evaluate.registry import AgentOptions
from pipeline.evaluate.runner import Progress, RunOptions, RunOutcome, evaluate
from pipeline.llm.cli_args import EXIT_BUDGET_EXCEEDED, EXIT_MODEL_FAILED, add_llm_arguments, client_from_args, print_cost_summary
from pipeline.argtypes import COUNT, LIMIT, SECONDS, add_run_arguments, add_skin_argument, label, number
from pipeline.sandbox.outside.executor import add_executor_arguments

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


# envforge learn's exported candidates: registered here, in the command layer, so that
# pipeline.evaluate never imports learning.
register_prefix(LEARNED, lambda path, o: learned_player(path, o.client, o.model_options))


def register(subparsers) -> None:
    limits, model = Limits(), ModelOptions()
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
    add_skin_argument(p, "; the agent label becomes AGENT@NAME")
    p.add_argument("--agent", default="react", metavar="AGENT", help=AGENT_HELP)
    p.add_argument("--agent-name", type=label, metavar="NAME",
                   help="how records and reports name the agent (default: the built-in name, or for your own agent "
                        "FILESTEM:ATTR or MODULE:ATTR, never a path)")
    p.add_argument("--runs", type=COUNT, default=3, help="runs per level (default 3, as in the paper)")
    p.add_argument("--split", choices=tuple(layout.LEVEL_SPLITS), default="test",
                   help="levels/ (test, default) or val_levels/ (val)")
    p.add_argument("--max-levels", type=COUNT, metavar="N", help="only the first N levels of each environment")
    add_run_arguments(p, jobs="episodes", concurrency=8, out="evaluation", resume_help=RESUME_HELP,
                      out_help="output folder (default ./evaluation); several agents and models may share one")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    g = p.add_argument_group("episode limits (0 turns one off; the random agent plays every step, as verify's "
                             "reliability baseline does, so only --max-steps and --episode-seconds apply to it)")
    g.add_argument("--max-steps", type=COUNT, default=limits.max_steps, metavar="N",
                   help="turns per episode (default: the environment's termination.max_steps)")
    g.add_argument("--invalid-action-streak", type=LIMIT, default=limits.invalid_action_streak, metavar="N",
                   help=f"stop after N invalid actions in a row (default {limits.invalid_action_streak})")
    g.add_argument("--format-error-streak", type=LIMIT, default=limits.format_error_streak, metavar="N",
                   help=f"stop after N replies in a row that hold no action (default {limits.format_error_streak})")
    g.add_argument("--loop-visits", type=LIMIT, default=limits.loop_visits, metavar="N",
                   help=f"stop when the same state comes back N times (default {limits.loop_visits})")
    g.add_argument("--stagnation-steps", type=LIMIT, default=limits.stagnation_steps, metavar="N",
                   help=f"stop after N steps with no new state and no reward (default {limits.stagnation_steps})")
    g.add_argument("--episode-seconds", type=number(0.0), default=limits.episode_seconds, metavar="S",
                   help=f"stop an episode after S seconds of wall clock, model calls included; every agent "
                        f"(default {limits.episode_seconds:g})")
    g.add_argument("--run-seconds", type=number(0.0), default=RunOptions.run_seconds, metavar="S",
                   help=f"start no episode after S seconds of wall clock (default {RunOptions.run_seconds:g})")
    a = p.add_argument_group("agents")
    a.add_argument("--history", type=LIMIT, default=model.history, metavar="N",
                   help=f"recent turns shown to react/tools each step (default {model.history})")
    a.add_argument("--max-tokens", type=COUNT, default=model.max_tokens, metavar="N",
                   help=f"output tokens per model call (default {model.max_tokens})")
    a.add_argument("--temperature", type=number(0.0, 2.0), metavar="T", help="sampling temperature (default: the provider's)")
    a.add_argument("--planner-nodes", type=COUNT, default=AgentOptions.planner_nodes, metavar="N",
                   help="planner search budget in nodes (environment steps): the same scores on an idle and a busy "
                        f"machine (default {AgentOptions.planner_nodes})")
    a.add_argument("--planner-seconds", type=SECONDS, default=AgentOptions.planner_seconds, metavar="S",
                   help="wall-clock safety stop of one planner search, not a budget: a plan it cuts is labelled in "
                        f"the trajectory's thoughts (default {AgentOptions.planner_seconds:g})")
    a.add_argument("--call-seconds", type=SECONDS, default=10.0, metavar="S",
                   help="wall-clock limit of one environment reset or step in the sandbox (default 10)")
    add_llm_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def find_targets(paths: list[str], split: str) -> list[EnvTarget]:
    envs: list[layout.EnvDir] = []
    for path in paths:
        found = layout.find_envs(path)
        if not found:
            raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) or a folder "
                            f"holding some, found {not_a_folder(path) if not Path(path).is_dir() else 'none'}")
        envs += [e for e in found if e.path not in {x.path for x in envs}]
    names = [e.name for e in envs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"expected environments with distinct folder names, found {', '.join(twice)} more than once")
    targets = [EnvTarget.load(e) for e in envs]
    empty = [t.name for t in targets if not t.dir.levels(split)]
    if empty:
        raise UserError(f"--split {split}: expected level files under {layout.LEVEL_SPLITS[split]}/ in every "
                        f"environment, found none in {', '.join(empty)}")
    return targets


EXIT_ENV_FAILED = 1  # episodes ended in env_error or agent_error: code failed, not the model's play


def _cause(detail: str) -> str:
    """A failed episode's cause on one line: its first line, and where it was raised when known."""
    lines = [line.strip() for line in (detail or "").splitlines() if line.strip()]
    if not lines:
        return "no detail"
    where = [line.split(", in ")[0] for line in lines if line.startswith("File ")]
    return lines[0][:300] + (f" ({where[-1]})" if where and where[-1] not in lines[0] else "")


def run(args) -> int:
    plots_wanted()  # a bad ENVFORGE_PLOTS is refused before anything runs
    if args.probes:
        from pipeline.commands.probe import evaluate_probes

        return evaluate_probes(args)
    job = prepare(args)
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
        print(f"envforge evaluate: {outcome.budget_message.partition(': ')[2]} "
              f"({outcome.not_started} episode(s) not started; re-run with the same --out and --resume to finish)", file=sys.stderr)
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


@dataclasses.dataclass
class Job:
    """An evaluation ready to run: what `envforge evaluate` and `envforge.evaluate()` share."""

    args: object
    targets: list[EnvTarget]
    client: object
    player: object
    options: RunOptions
    records: Records
    label: str


@dataclasses.dataclass
class Evaluation:
    """What an evaluation found: its episode records and per-environment and overall scores."""

    agent: str
    model: str
    split: str
    runs: int
    envs: dict  # env name -> EnvSummary (pipeline.evaluate.report)
    overall: dict
    episodes: list  # EpisodeRecord of this agent and model on these environments
    outcome: RunOutcome
    out: Path
    files: list[Path]
    environments: int
    mixed: list[str] = dataclasses.field(default_factory=list)  # the folder holds other splits or settings too

    def __repr__(self) -> str:
        """One line (the dataclass's own repr printed every episode twice: in `episodes` and in
        `outcome.finished`); the records are in `.episodes`."""
        mean = self.overall.get("mean_normalized")
        label = self.agent if self.model == NO_MODEL else f"{self.agent} {self.model}"
        return (f"Evaluation({label} on {self.environments} environment(s), split {self.split}, {self.runs} run(s): "
                f"{len(self.episodes)} episode(s), mean normalized "
                f"{'-' if mean is None else format(mean, '.4f')}; .envs, .overall, .episodes; records in {self.out})")

    def to_json(self) -> dict:
        return {"agent": self.agent, "model": self.model, "split": self.split, "runs": self.runs,
                "envs": {n: s.to_dict() for n, s in self.envs.items()}, "overall": rounded(self.overall),
                "episodes_run": len(self.outcome.finished), "skipped": self.outcome.skipped,
                "not_started": self.outcome.not_started, "rerun": self.outcome.rerun, "mixed": self.mixed,
                "out": str(self.out), "files": [str(f) for f in self.files]}


def prepare(args) -> Job:
    """Check the arguments and build the evaluation (UserError for bad input)."""
    if not args.env_dirs:
        raise UserError("expected at least one ENV_DIR (or --probes FILE)")
    if args.runs < 1 or args.concurrency < 1 or (args.max_levels is not None and args.max_levels < 1):
        raise UserError("--runs, --concurrency and --max-levels: expected positive numbers")
    targets = find_targets(args.env_dirs, args.split)
    out = Path(args.out).resolve()
    inside = [t.name for t in targets if out == t.dir.path.resolve() or t.dir.path.resolve() in out.parents]
    if inside:
        raise UserError(f"--out {args.out}: expected a folder outside the environments evaluated, found it inside "
                        f"{inside[0]} (its records would become part of the environment and change it)")
    episodes = Path(args.out) / EPISODES_JSONL
    if episodes.is_file() and episodes.stat().st_size and not args.resume:
        raise UserError(f"--out {args.out}: it already holds an evaluation ({EPISODES_JSONL}); pass --resume to continue "
                        f"it (episodes recorded with other settings run again), or choose another --out")
    if args.skin:
        unskinned = [t.name for t in targets if args.skin not in t.dir.skins()]
        if unskinned:
            raise UserError(f"--skin {args.skin}: expected the skin in every environment (make it with "
                            f"`envforge reskin ENV_DIR --style {args.skin}`), found it missing in {', '.join(unskinned)}")
    client = None
    kind, _ = kind_of(args.agent)
    if kind.model == "calls":
        if args.agent == "tools":
            bare = [t.name for t in targets if not t.tools]
            if bare:
                raise UserError(f"--agent tools: expected actions declared in config.yaml transition.actions, "
                                f"found none in {', '.join(bare)}")
        args.max_concurrency = args.max_concurrency or args.concurrency
        client = client_from_args(args)
        model = client.spec
    elif kind.model == "none":
        model = NO_MODEL
        if args.model:
            print(f"envforge evaluate: --model is ignored: the {args.agent} agent calls no model", file=sys.stderr)
    else:
        model = args.model or NO_MODEL  # a label only: the user's agent brings its own model, if any
    player = make_player(args.agent, client=client,
                         model_options=ModelOptions(args.max_tokens, args.temperature, args.history),
                         planner_nodes=args.planner_nodes, planner_seconds=args.planner_seconds)
    limits = Limits(args.max_steps, args.invalid_action_streak, args.format_error_streak, args.loop_visits,
                    args.stagnation_steps, args.episode_seconds)
    if args.agent == "random":
        limits = Limits(args.max_steps, 0, 0, 0, 0, args.episode_seconds)
    agent = (args.agent_name or display_name(args.agent)) + (f"@{args.skin}" if args.skin else "")  # in records and reports
    options = RunOptions(agent, model, args.runs, args.split,
                         args.max_levels, args.concurrency, limits,
                         dataclasses.replace(RunOptions.sandbox, call_seconds=args.call_seconds), args.skin,
                         run_seconds=args.run_seconds, agent_settings=_agent_settings(args))
    label = agent if model == NO_MODEL else f"{agent} {model}"
    return Job(args, targets, client, player, options, Records(args.out, repair=True), label)


async def execute(job: Job) -> Evaluation:
    """Play the job's episodes, then write the report; the scores of this agent and model (on
    this split, with these settings). One process at a time per output folder."""
    with files.locked(job.records.out, "evaluate"):
        async with (job.client or contextlib.nullcontext()):
            outcome = await evaluate(job.targets, job.player, job.options, job.records, Progress(job.label))
        records = job.records
        records.rewrite_csv()
        methods = summarize(records.all())
        written = write_report(records.out, methods)
    names = {t.name for t in job.targets}
    agent, model = job.options.agent, job.options.model
    this_run = (agent, model, job.options.split, settings_key(job.options.settings()))
    current = next((m for m in methods if (m.agent, m.model, m.split, settings_key(m.settings)) == this_run), None)
    envs = {n: s for n, s in (current.envs.items() if current else []) if n in names}
    episodes = [r for r in records.all()
                if r.env in names and (r.agent, r.model, r.split, settings_key(r.settings)) == this_run]
    mine = summarize(episodes)
    paths = [records.out / EPISODES_JSONL, records.out / EPISODES_CSV] + written
    return Evaluation(agent, model, job.options.split, job.options.runs, envs, mine[0].overall if mine else {},
                      episodes, outcome, records.out, paths, len(job.targets), mixed(methods))


def _agent_settings(args) -> dict:
    """The agent's options that change how it plays, and a hash of its code when it is a file."""
    kind, _ = kind_of(args.agent)
    if kind.model == "calls":
        settings = {"max_tokens": args.max_tokens, "temperature": args.temperature, "history": args.history}
    elif args.agent == "planner":
        settings = {"planner_nodes": args.planner_nodes, "planner_seconds": args.planner_seconds}
    else:
        settings = {}
    if args.agent.startswith(LEARNED):
        source = Path(args.agent[len(LEARNED):])
    else:  # path/file.py:ATTR (MODULE:ATTR names no file)
        source = Path(args.agent.rpartition(":")[0]) if ":" in args.agent else None
    code = [] if source is None else sorted(p for p in source.iterdir() if p.is_file()) if source.is_dir() else \
        [source] if source.is_file() else []
    if code:
        settings["agent_sha256"] = hashlib.sha256(b"".join(p.read_bytes() for p in code)).hexdigest()
    return settings


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
        print(f"overall: {overall['mean_normalized'] * 100:.2f}%{std}, {round(overall['mean_steps'], 2):g} steps per episode, "
              f"{overall['clipped']} clipped, ${overall['dollars']:.4f}")
    for note in result.mixed:
        print(f"note: {note}")
    print("written: " + ", ".join(str(f) for f in result.files))
