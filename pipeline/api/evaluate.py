"""Score an agent on environments (AutoEnv §5, Table 3): the library call under `envforge
evaluate` and `envforge.evaluate()`.

    job = prepare(["generated_envs/reference"], EvaluateOptions(agent="planner", max_levels=2))
    result = await execute(job)          # or: await evaluate(env_dirs, options)

Writes episodes.jsonl, episodes.csv, trajectories/, report.md, summary.json and plots to
`options.out`; returns an `Evaluation` (the scores of this agent and model, on this split, with
these settings). An `out` that already holds episodes is refused unless `resume`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import sys
from pathlib import Path

from envforge.learning.export import LEARNED, learned_player
from envforge.pipeline import layout
from envforge.pipeline import records as files
from envforge.pipeline.api.options import ExecutorOptions, LLMOptions, Options, group, option, skin_option
from envforge.pipeline.api.values import COUNT, LIMIT, SECONDS, label, number, one_of, out_dir
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError, not_a_folder
from envforge.pipeline.evaluate import Limits, ModelOptions, display_name, kind_of, make_player, register_prefix
from envforge.pipeline.evaluate.records import EPISODES_CSV, EPISODES_JSONL, NO_MODEL, Records
from envforge.pipeline.evaluate.registry import AgentOptions
from envforge.pipeline.evaluate.report import mixed, plots_wanted, settings_key, summarize, write_report
from envforge.pipeline.evaluate.runner import Player, Progress, RunOptions, RunOutcome
from envforge.pipeline.evaluate.runner import evaluate as run_episodes
from envforge.pipeline.kinds import rounded
from envforge.pipeline.llm.client import LLMClient
from envforge.pipeline.sandbox.outside.executor import Executor, running_on

# envforge learn's exported candidates: registered here, above pipeline.evaluate, so that
# pipeline.evaluate never imports learning.
register_prefix(LEARNED, lambda path, o: learned_player(path, o.client, o.model_options))


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
LIMITS = ("episode limits (0 turns one off; the random agent plays every step, as verify's reliability baseline "
          "does, so only --max-steps and --episode-seconds apply to it)")
AGENTS = "agents"


@dataclasses.dataclass(frozen=True)
class EvaluateOptions(Options):
    """How to evaluate: the agent, the runs, the episode limits, the model and where to write."""

    agent: str = option("react", metavar="AGENT", help=AGENT_HELP)
    agent_name: str | None = option(None, label, metavar="NAME", help="how records and reports name the agent "
                                    "(default: the built-in name, or for your own agent FILESTEM:ATTR or "
                                    "MODULE:ATTR, never a path)")
    skin: str | None = skin_option("; the agent label becomes AGENT@NAME")
    runs: int = option(3, COUNT, help="runs per level (default {default}, as in the paper)")
    split: str = option("test", one_of(*layout.LEVEL_SPLITS), help="levels/ (test, default) or val_levels/ (val)")
    max_levels: int | None = option(None, COUNT, metavar="N", help="only the first N levels of each environment")
    concurrency: int = option(8, COUNT, metavar="N", help="episodes at once (default {default})")
    out: str = option("evaluation", out_dir, metavar="DIR", help="output folder (default ./{default}); several "
                      "agents and models may share one")
    resume: bool = option(False, help=RESUME_HELP)
    max_steps: int = option(Limits.max_steps, COUNT, metavar="N", section=LIMITS,
                            help="turns per episode (default: the environment's termination.max_steps)")
    invalid_action_streak: int = option(Limits.invalid_action_streak, LIMIT, metavar="N", section=LIMITS,
                                        help="stop after N invalid actions in a row (default {default})")
    format_error_streak: int = option(Limits.format_error_streak, LIMIT, metavar="N", section=LIMITS,
                                      help="stop after N replies in a row that hold no action (default {default})")
    loop_visits: int = option(Limits.loop_visits, LIMIT, metavar="N", section=LIMITS,
                              help="stop when the same state comes back N times (default {default})")
    stagnation_steps: int = option(Limits.stagnation_steps, LIMIT, metavar="N", section=LIMITS,
                                   help="stop after N steps with no new state and no reward (default {default})")
    episode_seconds: float = option(Limits.episode_seconds, number(0.0), metavar="S", section=LIMITS,
                                    help="stop an episode after S seconds of wall clock, model calls included; "
                                         "every agent (default {default})")
    run_seconds: float = option(RunOptions.run_seconds, number(0.0), metavar="S", section=LIMITS,
                                help="start no episode after S seconds of wall clock (default {default})")
    history: int = option(ModelOptions.history, LIMIT, metavar="N", section=AGENTS,
                          help="recent turns shown to react/tools each step (default {default})")
    max_tokens: int = option(ModelOptions.max_tokens, COUNT, metavar="N", section=AGENTS,
                             help="output tokens per model call (default {default})")
    temperature: float | None = option(None, number(0.0, 2.0), metavar="T", section=AGENTS,
                                       help="sampling temperature (default: the provider's)")
    planner_nodes: int = option(AgentOptions.planner_nodes, COUNT, metavar="N", section=AGENTS,
                                help="planner search budget in nodes (environment steps): the same scores on an "
                                     "idle and a busy machine (default {default})")
    planner_seconds: float = option(AgentOptions.planner_seconds, SECONDS, metavar="S", section=AGENTS,
                                    help="wall-clock safety stop of one planner search, not a budget: a plan it "
                                         "cuts is labelled in the trajectory's thoughts (default {default})")
    call_seconds: float = option(RunOptions.sandbox.call_seconds, SECONDS, metavar="S", section=AGENTS,
                                 help="wall-clock limit of one environment reset or step in the sandbox "
                                      "(default {default})")
    llm: LLMOptions = group(LLMOptions)
    executor: ExecutorOptions = group(ExecutorOptions)

    def limits(self) -> Limits:
        """The episode limits; the random agent plays every step, as verify's reliability baseline
        does, so only max_steps and episode_seconds apply to it."""
        if self.agent == "random":
            return Limits(self.max_steps, 0, 0, 0, 0, self.episode_seconds)
        return Limits(self.max_steps, self.invalid_action_streak, self.format_error_streak, self.loop_visits,
                      self.stagnation_steps, self.episode_seconds)


def find_targets(paths: list[str], split: str) -> list[EnvSpec]:
    """The environments under `paths` (folders, or folders holding them), each with levels of `split`."""
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
    targets = [EnvSpec.open(e.path) for e in envs]
    empty = [t.name for t in targets if not t.levels(split)]
    if empty:
        raise UserError(f"--split {split}: expected level files under {layout.LEVEL_SPLITS[split]}/ in every "
                        f"environment, found none in {', '.join(empty)}")
    return targets


@dataclasses.dataclass
class Job:
    """An evaluation ready to run."""

    options: EvaluateOptions
    targets: list[EnvSpec]
    client: LLMClient | None  # None for an agent that calls no model
    player: Player
    run: RunOptions
    records: Records
    label: str
    executor: Executor  # where the episodes' sandboxed work runs


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


def prepare(env_dirs: list[str], options: EvaluateOptions) -> Job:
    """Check the options and build the evaluation (UserError for bad input)."""
    executor = options.executor.start()  # a Ray cluster joined before anything is written
    plots_wanted()  # a bad ENVFORGE_PLOTS is refused before anything runs
    if not env_dirs:
        raise UserError("expected at least one ENV_DIR (or --probes FILE)")
    if options.runs < 1 or options.concurrency < 1 or (options.max_levels is not None and options.max_levels < 1):
        raise UserError("--runs, --concurrency and --max-levels: expected positive numbers")
    targets = find_targets(env_dirs, options.split)
    out = Path(options.out).resolve()
    inside = [t.name for t in targets if out == t.dir.path.resolve() or t.dir.path.resolve() in out.parents]
    if inside:
        raise UserError(f"--out {options.out}: expected a folder outside the environments evaluated, found it inside "
                        f"{inside[0]} (its records would become part of the environment and change it)")
    episodes = Path(options.out) / EPISODES_JSONL
    if episodes.is_file() and episodes.stat().st_size and not options.resume:
        raise UserError(f"--out {options.out}: it already holds an evaluation ({EPISODES_JSONL}); pass --resume to "
                        f"continue it (episodes recorded with other settings run again), or choose another --out")
    if options.skin:
        unskinned = [t.name for t in targets if options.skin not in t.dir.skins()]
        if unskinned:
            raise UserError(f"--skin {options.skin}: expected the skin in every environment (make it with "
                            f"`envforge reskin ENV_DIR --style {options.skin}`), found it missing in "
                            f"{', '.join(unskinned)}")
    client = None
    kind, _ = kind_of(options.agent)
    if kind.model == "calls":
        if options.agent == "tools":
            bare = [t.name for t in targets if not t.tools]
            if bare:
                raise UserError(f"--agent tools: expected actions declared in config.yaml transition.actions, "
                                f"found none in {', '.join(bare)}")
        llm = dataclasses.replace(options.llm, max_concurrency=options.llm.max_concurrency or options.concurrency)
        client = llm.client()
        model = client.spec
    elif kind.model == "none":
        model = NO_MODEL
        if options.llm.model:
            print(f"envforge evaluate: --model is ignored: the {options.agent} agent calls no model", file=sys.stderr)
    else:
        model = options.llm.model or NO_MODEL  # a label only: the user's agent brings its own model, if any
    player = make_player(options.agent, client=client,
                         model_options=ModelOptions(options.max_tokens, options.temperature, options.history),
                         planner_nodes=options.planner_nodes, planner_seconds=options.planner_seconds)
    agent = (options.agent_name or display_name(options.agent)) + (f"@{options.skin}" if options.skin else "")
    run = RunOptions(agent, model, options.runs, options.split, options.max_levels, options.concurrency,
                     options.limits(), dataclasses.replace(RunOptions.sandbox, call_seconds=options.call_seconds),
                     options.skin, run_seconds=options.run_seconds, agent_settings=_agent_settings(options))
    label = agent if model == NO_MODEL else f"{agent} {model}"
    return Job(options, targets, client, player, run, Records(options.out, repair=True), label, executor)


async def execute(job: Job) -> Evaluation:
    """Play the job's episodes, then write the report; the scores of this agent and model (on
    this split, with these settings). One process at a time per output folder."""
    with files.locked(job.records.out, "evaluate"), running_on(job.executor):
        async with (job.client or contextlib.nullcontext()):
            outcome = await run_episodes(job.targets, job.player, job.run, job.records, Progress(job.label))
        records = job.records
        records.rewrite_csv()
        methods = summarize(records.all())
        written = write_report(records.out, methods)
    names = {t.name for t in job.targets}
    agent, model = job.run.agent, job.run.model
    this_run = (agent, model, job.run.split, settings_key(job.run.settings()))
    current = next((m for m in methods if (m.agent, m.model, m.split, settings_key(m.settings)) == this_run), None)
    envs = {n: s for n, s in (current.envs.items() if current else []) if n in names}
    episodes = [r for r in records.all()
                if r.env in names and (r.agent, r.model, r.split, settings_key(r.settings)) == this_run]
    mine = summarize(episodes)
    paths = [records.out / EPISODES_JSONL, records.out / EPISODES_CSV] + written
    return Evaluation(agent, model, job.run.split, job.run.runs, envs, mine[0].overall if mine else {},
                      episodes, outcome, records.out, paths, len(job.targets), mixed(methods))


async def evaluate(env_dirs: list[str], options: EvaluateOptions) -> Evaluation:
    """prepare, then execute."""
    return await execute(prepare(env_dirs, options))


def _agent_settings(options: EvaluateOptions) -> dict:
    """The agent's options that change how it plays, and a hash of its code when it is a file."""
    agent = options.agent
    kind, _ = kind_of(agent)
    if kind.model == "calls":
        settings = {"max_tokens": options.max_tokens, "temperature": options.temperature, "history": options.history}
    elif agent == "planner":
        settings = {"planner_nodes": options.planner_nodes, "planner_seconds": options.planner_seconds}
    else:
        settings = {}
    if agent.startswith(LEARNED):
        source = Path(agent[len(LEARNED):])
    else:  # path/file.py:ATTR (MODULE:ATTR names no file)
        source = Path(agent.rpartition(":")[0]) if ":" in agent else None
    code = [] if source is None else sorted(p for p in source.iterdir() if p.is_file()) if source.is_dir() else \
        [source] if source.is_file() else []
    if code:
        settings["agent_sha256"] = hashlib.sha256(b"".join(p.read_bytes() for p in code)).hexdigest()
    return settings
