"""envforge environments as Inspect AI tasks (`pip install 'envforge-rl[inspect]'`).

    inspect eval envforge/env -T path=generated_envs/reference/crate_dock --model anthropic/claude-…
    inspect eval envforge/reference -T env=crate_dock --model …   # the bundled ones, from any folder
    inspect view                                # the transcripts, from ./logs (or $INSPECT_LOG_DIR)

`path` is an environment folder or a folder holding some. Each level of the split is a sample.
The model acts through one tool per declared action, with the action's typed parameters, one
action per turn; the environment steps in a sandbox worker. The episode runs under envforge
evaluate's loop and limits (pipeline.evaluate.episode): the env's max_steps, and a stop after
too many turns without a tool call or too many invalid actions. The score is the normalized
reward (total / the level's certified max reward, clipped at 1) and whether the level was solved;
an episode that ended for a reason outside the model's play (the environment failed, its rewards
were not finite: invalid_reward) is unscored, left out of the means as evaluate leaves it out.
The package registers these tasks with Inspect through the `inspect_ai` entry point.
"""
from __future__ import annotations

import asyncio
import re
import site
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageTool, ChatMessageUser, get_model
from inspect_ai.scorer import Score, Target, mean, scorer, std, stderr
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import ToolInfo

from envforge import _tokenizer
from envforge.pipeline import layout, paths
from envforge.pipeline.api.environment import Environment
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.context import WorkerSession
from envforge.pipeline.evaluate.episode import (
    INFRASTRUCTURE,
    STOP_REASONS,
    Decision,
    Limits,
    Tracker,
    Turn,
    run_episode,
)
from envforge.pipeline.evaluate.records import NO_MODEL
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient, StepResult

EPISODE = "envforge_episode"  # the store key of the episode's record
CALL_ONE_TOOL = "Call exactly one of the tools: one action per turn."


def _in_site_packages(path: Path) -> bool:
    places = [*site.getsitepackages(), site.getusersitepackages()]
    return "site-packages" in path.parts or any(str(path).startswith(p) for p in places)


# `inspect eval envforge/env` names a task by the installed package it comes from, which Inspect tells
# by the module's place in site-packages (a wheel) or by an editable distribution named as the package.
# envforge's distribution is envforge-rl (the index's `envforge` is another project), so an editable
# install goes untold: there each task's name carries the package itself, and envforge/NAME finds it
# installed either way.
NAMESPACE = "" if _in_site_packages(Path(__file__).resolve()) else "envforge/"


@task(name=f"{NAMESPACE}env")
def env(path: str = str(paths.GENERATED_ENVS_DIR), split: str = "test", max_levels: int | None = None,
        skin: str | None = None, difficulty: str | None = None, curriculum: bool = False) -> Task:
    """Every level of the environment(s) at `path` as a sample (see the module docstring); with
    `difficulty` (easy|medium|hard or "LO..HI"), those in that band; `curriculum`: easy to hard."""
    return _task(Path(path), split, max_levels, skin, difficulty, curriculum)


@task(name=f"{NAMESPACE}reference")
def reference(env: str | None = None, split: str = "test", max_levels: int | None = None,
              skin: str | None = None) -> Task:
    """The reference environments that come with envforge (all, or the one named `env`), from any folder."""
    return _task(paths.REFERENCE_ENVS_DIR / env if env else paths.REFERENCE_ENVS_DIR, split, max_levels, skin)


def _task(path: Path, split: str, max_levels: int | None, skin: str | None, difficulty: str | None = None,
          curriculum: bool = False) -> Task:
    envs = [Environment(e.path) for e in layout.find_envs(path)]
    if not envs:
        raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) or a folder "
                        f"holding some, found none")
    samples = []
    for e in envs:
        for level, max_reward, note in e.scored_levels(split, max_levels, "the task", difficulty, curriculum):
            profile = e.difficulty(level)
            samples.append(Sample(
                input=f"{e.instruction}\n\n{e.action_text}".strip(), id=f"{e.name}/{layout.level_key(level)}",
                metadata={"env": str(e.path), "level": level, "split": split, "max_reward": max_reward,
                          "max_note": note, "skin": skin, "difficulty": profile["score"] if profile else None,
                          "difficulty_band": profile["band"] if profile else None, "difficulty_profile": profile}))
    if not samples:
        raise UserError(f"{path}: expected level files under {layout.LEVEL_SPLITS[split]}/, found none")
    name = layout.EnvDir.at(path).name
    _tokenizer.provide()  # Inspect counts tokens with tiktoken's o200k_base: offline, from the extra's copy
    return Task(dataset=MemoryDataset(samples, name=f"envforge-{name}"), solver=episode(),
                scorer=normalized_reward(), name=f"envforge_{name}")


@solver
def episode(history: int = 10):
    """Play the sample's level: the model's tool calls are the actions; the record goes to the store."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        meta = state.metadata
        environment = Environment(meta["env"])
        spec = environment.spec
        tracker = Tracker(Limits(), environment.max_steps, meta.get("max_reward"), spec.actions,
                          max_note=meta.get("max_note") or "")
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envforge-inspect")
        loop = asyncio.get_running_loop()
        agent = ToolAgent(state, [ToolInfo.model_validate(t) for t in spec.tools])
        try:
            client = await loop.run_in_executor(executor, lambda: EnvClient.start(
                spec, SandboxLimits(call_seconds=10.0), skin=meta.get("skin")))
        except SandboxFailure as f:
            executor.shutdown(wait=False)
            tracker.stop("env_error", f"the environment did not load: {f}")
        else:
            session = LastStep(client, executor)
            try:
                await run_episode(agent, session, Level.parse(meta["level"]), tracker, history)
            finally:
                await loop.run_in_executor(executor, client.close)
                executor.shutdown(wait=False)
            agent.finish(tracker, session.last)
        record = tracker.record(env=spec.name, level=meta["level"], run=state.epoch - 1, agent="inspect",
                                model=str(state.model) or NO_MODEL, split=meta["split"], tags=spec.tags)
        state.store.set(EPISODE, record.to_dict())
        return state

    return solve


class ToolAgent:
    """One model turn per agent turn, in the task's message list: the observation goes back as
    the result of the previous tool call; a reply with no tool call is a format error."""

    def __init__(self, state: TaskState, tools: list[ToolInfo]):
        self.state, self.tools = state, tools
        self.pending: list[Any] = []  # the last reply's tool calls, still to be answered

    async def act(self, turn: Turn) -> Decision:
        self._answer(turn.observation, turn.last_action_result)
        output = await get_model().generate(self.state.messages, tools=self.tools)
        self.state.output = output
        self.state.messages.append(output.message)
        usage = output.usage
        cost = dict(reply=output.completion, tokens_in=usage.input_tokens if usage else 0,
                    tokens_out=usage.output_tokens if usage else 0, calls=1)
        self.pending = list(output.message.tool_calls or [])
        if not self.pending:
            return Decision(error="format", message="the reply called no tool", **cost)
        call = self.pending[0]
        return Decision(action={"action": call.function, "params": dict(call.arguments or {})}, **cost)

    def _answer(self, observation: Any, feedback: Any, after: str = "") -> None:
        text = (f"{feedback}\n\n" if feedback else "") + preformatted(observation) + after
        if not self.pending:  # the first turn, or a reply that called no tool
            self.state.messages.append(ChatMessageUser(content=f"{CALL_ONE_TOOL}\n\n{text}"))
            return
        first, *rest = self.pending
        self.state.messages.append(ChatMessageTool(content=text, tool_call_id=first.id, function=first.function))
        for call in rest:
            self.state.messages.append(ChatMessageTool(content=f"ignored: {CALL_ONE_TOOL}", tool_call_id=call.id,
                                                       function=call.function))
        self.pending = []

    def finish(self, tracker: Tracker, last: StepResult | None) -> None:
        """Answer the last tool calls, so the transcript ends with what the episode came to."""
        if self.pending:
            self._answer(last.observation if last else None, last.last_action_result if last else None,
                         f"\n\nThe episode ended: {tracker.stop_reason}")


def preformatted(observation: Any) -> str:
    """The observation as a fenced block: Inspect shows messages as Markdown, where a board's rows
    would merge and `$` open LaTeX; in a fence it is shown as the environment drew it. The fence is
    longer than any run of backticks in the text, so the text cannot close it."""
    text = str(observation)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


class LastStep(WorkerSession):
    """A worker session that keeps the environment's last reply (the transcript's last word)."""

    last: StepResult | None = None

    async def step(self, action: dict) -> StepResult:
        self.last = await super().step(action)
        return self.last


@scorer(metrics={"normalized": [mean(), stderr(), std()], "solved": [mean(), stderr()]})
def normalized_reward():
    """The episode's normalized reward (0 when the level has no usable max reward; the explanation
    says so) and whether it was solved (reached the certified max reward)."""

    async def score(state: TaskState, target: Target) -> Score:
        record = state.store.get(EPISODE)
        if record["stop_reason"] in INFRASTRUCTURE:  # as in evaluate: left out of the scores, and counted
            return Score.unscored(reason=record["stop_reason"], answer=record["stop_reason"], metadata=record,
                                  explanation=f"{record['stop_reason']}: {STOP_REASONS[record['stop_reason']]}: "
                                              f"{record['stop_detail'][:500]}")
        normalized = record["normalized"]
        note = record["normalized_note"] or f"total reward {record['total_reward']:g} of max {record['max_reward']}"
        return Score(value={"normalized": normalized if normalized is not None else 0.0,
                            "solved": 1.0 if record["stop_reason"] == "solved" else 0.0},
                     answer=record["stop_reason"], explanation=f"{record['stop_reason']}: {note}", metadata=record)

    return score
