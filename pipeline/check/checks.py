"""The checks of `envforge check`, one function each, in the order they run: `files` (the folder,
its config and its static scan), then, each in a live sandbox worker, IN_A_WORKER. Each reads the
folder through `c` (a checker.Checker) and adds what it finds to `c.report`.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from envforge.pipeline import layout
from envforge.pipeline.check.static import other_python_files, scan_env
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import LocatedError, not_a_folder
from envforge.pipeline.evaluate.agents import ActionsAgent, RandomAgent
from envforge.pipeline.evaluate.episode import run_episode_sync
from envforge.pipeline.sandbox import SandboxFailure

if TYPE_CHECKING:
    from envforge.pipeline.check.checker import Checker

GENERATOR_SEEDS = (1, 2, 3)
GENERATED_START_SEEDS = (101, 102)
RANDOM_EPISODES = 3


def files(c: Checker) -> bool:
    if not c.env.path.is_dir():
        c.problem(str(c.env.path), "an environment folder", not_a_folder(c.env.path), "layout")
        return False
    for name in c.env.missing_required():
        c.problem(name, "the file to exist", "it is missing", "layout")
    if c.env.missing_required():
        return False
    try:
        c.spec = EnvSpec.open(c.env.path, full_paths=False)
    except LocatedError as e:
        c.report.problems.append(dataclasses.replace(e.problem, check="layout"))
        return False
    c.config = c.spec.config
    c.space = c.spec.actions
    _dsl(c)
    for problem in scan_env(c.env.path):
        c.report.problems.append(problem)
    c.report.stats["not_imported"] = other_python_files(c.env.path)
    if not c.spec.all_levels() and not c.env.file(layout.ENV_GENERATE).exists():
        c.problem(layout.LEVELS + "/", f"at least one level file (*.yaml) or a generator in {layout.ENV_GENERATE}",
                     "neither", "levels")
    c.report.stats["levels"] = len(c.spec.all_levels())
    c.report.stats["actions"] = len(c.space)
    c.report.stats["action_domains"] = {f"{a}.{p}": source for (a, p), source in c.space.sources.items()}
    if not c.space:
        c.problem(layout.CONFIG, "at least one action under transition.actions", "none", "actions")
    return not any(p.severity == "error" and p.check == "static" for p in c.report.problems)


def _dsl(c: Checker) -> None:
    """DSL findings are warnings here: `envforge dsl check` is the strict gate."""
    from envforge.dsl_schema.check import check_text

    for p in check_text(c.spec.config_text, layout.CONFIG):
        c.report.problems.append(dataclasses.replace(p, file=layout.CONFIG, severity="warning", check="dsl"))


def _starts(c: Checker) -> list[Level]:
    """Where episodes start: the shipped levels, else levels generated from fixed seeds
    (a freshly written environment has no level files until verification makes them)."""
    shipped = c.spec.all_levels()
    return shipped or [Level(seed=seed) for seed in GENERATED_START_SEEDS]


def levels(c: Checker) -> None:
    for level, worker in c.with_workers(c.spec.all_levels()):
        try:
            first = worker.reset(level)
        except SandboxFailure as f:
            c.failure(f, f"reset on {level} to succeed", "levels")
            continue
        _observation(c, first.observation, f"the observation after reset on {level}")


def _observation(c: Checker, observation, what: str) -> None:
    if observation is None or (isinstance(observation, str) and not observation.strip()):
        c.problem(layout.ENV_MAIN, f"{what} to render to non-empty text", repr(observation), "render")


def actions(c: Checker) -> None:
    start = _starts(c)[0]
    for action, worker in c.with_workers(c.space):
        sent = {"action": action.name, "params": c.space.sample_params(action, c.rng)}
        try:
            worker.reset(start)
            result = worker.step(sent)
        except SandboxFailure as f:
            c.failure(f, f"step({_fmt(sent)}) to succeed", "actions")
            continue
        _observation(c, result.observation, f"the observation after {action.name}")


def episodes(c: Checker) -> None:
    space = c.space
    starts = _starts(c)
    truncated = []
    lengths = []
    for i, worker in c.with_workers(range(RANDOM_EPISODES)):
        start = starts[i % len(starts)]
        where = _start_name(start)
        try:
            episode = run_episode_sync(RandomAgent(space, c.rng, invalid_rate=0.2), worker, start, seed=i)
        except SandboxFailure as f:
            c.failure(f, f"a random episode on {where} to run without failure", "episodes")
            continue
        lengths.append(episode.steps)
        if episode.truncated and not episode.ended_at_cap:
            truncated.append(where)
    c.report.stats["random_episode_steps"] = lengths
    if truncated:
        # The runtime truncates the episode at the cap, so this is no fault, but an env whose
        # episodes never end by themselves is worth a look.
        c.problem(layout.ENV_MAIN, f"done() to become true by termination.max_steps={c.max_steps}",
                     f"still running after {c.max_steps} steps on {', '.join(truncated)} (the runtime "
                     f"truncated it)", "episodes", severity="warning")


def generator(c: Checker) -> None:
    hashes = {}
    for seed, worker in c.with_workers(GENERATOR_SEEDS + GENERATOR_SEEDS[:1]):
        try:
            result = worker.reset(Level(seed=seed), want_state=True)
        except SandboxFailure as f:
            file = layout.ENV_GENERATE if c.env.file(layout.ENV_GENERATE).exists() else layout.ENV_MAIN
            c.failure(f, f"the generator to make a level for seed {seed}", "generator", file)
            return
        try:
            verdict = worker.validate()  # the state as generated, in this worker (no JSON round trip)
        except SandboxFailure as f:
            c.failure(f, f"the validator to run on the level generated with seed {seed}", "validator",
                         layout.ENV_VALIDATOR)
            return
        if not verdict.ok:
            c.problem(layout.ENV_GENERATE, f"the validator to accept the level generated with seed {seed}",
                         "; ".join(verdict.issues) or "rejected without a reason", "generator")
        if seed in hashes and hashes[seed] != result.state_hash:
            c.problem(layout.ENV_GENERATE, f"the same level for the same seed ({seed})",
                         "a different level on the second call", "generator")
        hashes.setdefault(seed, result.state_hash)
    if len(set(hashes.values())) < len(GENERATOR_SEEDS):
        c.problem(layout.ENV_GENERATE, f"different levels for seeds {list(GENERATOR_SEEDS)}",
                     f"only {len(set(hashes.values()))} distinct level(s)", "generator")
    c.report.stats["generator_seeds"] = len(hashes)


def validator(c: Checker) -> None:
    if not c.env.file(layout.ENV_VALIDATOR).exists():
        c.problem(layout.ENV_VALIDATOR, "a level validator", "the file is missing", "validator")
        return
    for level, worker in c.with_workers(c.spec.all_levels()):
        try:
            verdict = worker.validate(level)
        except SandboxFailure as f:
            c.failure(f, f"the validator to run on {level}", "validator", layout.ENV_VALIDATOR)
            return
        if not verdict.ok:
            c.problem(str(level), "the validator to accept this shipped level",
                         "; ".join(verdict.issues) or "rejected without a reason", "validator")


def determinism(c: Checker) -> None:
    start = _starts(c)[0]
    plan = [c.space.sample(c.rng) for _ in range(min(c.max_steps, 20))]
    runs = []
    for _, worker in c.with_workers(range(2)):
        try:
            episode = run_episode_sync(ActionsAgent(plan), worker, start, seed=7, limit=len(plan))
        except SandboxFailure as f:
            c.failure(f, "a replayed episode to run", "determinism")
            return
        runs.append(episode)
    first, second = runs
    for i, (a, b) in enumerate(zip(first.observations, second.observations)):
        if a != b or (i and first.rewards[i - 1] != second.rewards[i - 1]):
            c.problem(
                layout.ENV_MAIN,
                f"the same observations and rewards for the same level, seed and actions (step {i})",
                first_difference(a, b) if a != b else f"reward {first.rewards[i - 1]!r} then {second.rewards[i - 1]!r}",
                "determinism",
            )
            return


IN_A_WORKER = (levels, actions, episodes, generator, validator, determinism)


def _start_name(start: Level) -> str:
    return start.file or f"the level generated from seed {start.seed}"


def _fmt(action: dict) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in action.get("params", {}).items())
    return f"{action['action']}({params})"


def first_difference(a, b, context: int = 30) -> str:
    """Where two observations first differ, with a little text around it from each."""
    a, b = str(a), str(b)
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    line = a.count("\n", 0, at) + 1
    start = max(0, at - context)

    def excerpt(text: str) -> str:
        return ("…" if start else "") + text[start:at + context] + ("…" if len(text) > at + context else "")
    return f"they first differ at character {at} (line {line}): {excerpt(a)!r} then {excerpt(b)!r}"
