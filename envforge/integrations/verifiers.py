"""envforge environments as verifiers environments (pip install 'envforge-rl[verifiers]', verifiers 0.4).

verifiers 0.4 (`import verifiers.v1 as vf`) loads an environment as an installed package that exports
a `vf.Taskset` (and here an `vf.Env` and a `vf.Harness`) through `__all__`; `envforge export verifiers
ENV_DIR --out DIR` writes one per environment folder, envforge_NAME, built from the classes here:

    vf-eval envforge_crate_dock -m MODEL --client.base-url URL --client.api-key-var OPENAI_API_KEY -n 5
    env = envforge_crate_dock.load_environment(split="test", max_levels=5)   # a vf.Env, in process

`LevelsTaskset` yields one task per level of the split (a level whose max reward is unknown is left
out, as evaluate leaves it out of normalized scores). `PlayEnv.run` plays a task: it starts a sandbox
worker for the level (the environment's code never runs in this process), shows the model the
prompts of envforge's ReAct agent (the instruction and action space as the system prompt, then each
observation as the user's turn), and reads every reply as an action: the dictionary in its last
<action></action> block, as the ReAct agent reads it, else the reply as `envforge play` reads a typed
action (`move north`, JSON). The episode runs under envforge evaluate's rules
(pipeline.evaluate.episode.Tracker): the environment's terminated/truncated, its step cap, and the
stops after too many format errors, invalid actions, loops or stagnant steps. The task's reward
`normalized` is the episode's normalized reward (total / the level's certified max reward, clipped at
1) and its metric `solved` 1 when the level's max was reached: the numbers `envforge evaluate`
reports for the same actions. The whole episode record is `trace.info["envforge_episode"]`; an
episode that ended for a reason outside the model's play (the environment failed) scores 0 and says
so there.

`ChatHarness` is the agent's program: one chat completion per turn, sent from this process through
the rollout's interception endpoint (verifiers records the turn there), with no tools and nothing
run in the agent's runtime (a local working folder).
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Iterator

import openai
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire

from envforge.pipeline import layout
from envforge.pipeline.api.environment import Environment
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.context import WorkerSession
from envforge.pipeline.evaluate.episode import Decision, Limits, Tracker, Turn, env_fault
from envforge.pipeline.evaluate.model_agents import agent_turn, with_system
from envforge.pipeline.evaluate.react import FormatError, parse_action
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

__all__ = ["ChatHarness", "LevelsTaskset", "PlayEnv", "load_environment"]

EPISODE = "envforge_episode"  # the trace.info key of the finished episode's record (evaluate's fields)
HISTORY = 10  # recent turns shown in each prompt, as evaluate's ReAct agent shows them
MAX_REPLY = 20_000  # characters of a reply kept in the episode record


class LevelData(vf.TaskData):
    """One level of an environment folder: what a rollout needs to play it (JSON, so it crosses to
    an env server whole)."""
    env: str  # the environment folder
    level: str  # its level id, "levels/level_01.yaml"
    split: str = "test"
    max_reward: float | None = None
    max_note: str = ""
    skin: str | None = None
    difficulty: int | None = None  # the level's difficulty score (pipeline/difficulty.py), None when unprofiled
    difficulty_band: str | None = None
    difficulty_profile: dict | None = None  # every figure, with whether it is exact


class LevelTask(vf.Task[LevelData]):
    @property
    def key(self) -> str:
        return self.data.id or self.hash  # the environment and level, the same in every run

    @vf.reward
    async def normalized(self, trace: vf.Trace) -> float:
        """The episode's normalized reward, as evaluate reports it (0 when it has none: unscored, or
        no usable max; the record in trace.info says why)."""
        value = (trace.info.get(EPISODE) or {}).get("normalized")
        return float(value) if value is not None else 0.0

    @vf.metric
    async def solved(self, trace: vf.Trace) -> float:
        return 1.0 if (trace.info.get(EPISODE) or {}).get("stop_reason") == "solved" else 0.0


class LevelsConfig(vf.TasksetConfig):
    split: str = "test"
    """The levels played: "test" (levels/) or "val" (val_levels/)."""
    skin: str | None = None
    """Render through skins/<skin>.py."""
    max_levels: int | None = None
    """The first N levels of the split (as `envforge evaluate --max-levels`)."""
    difficulty: str | None = None
    """Only the levels in this difficulty band: easy, medium, hard, or a score range "LO..HI"."""
    curriculum: bool = False
    """The levels ordered easy to hard by difficulty score."""


class LevelsTaskset(vf.Taskset[LevelTask, LevelsConfig]):
    """Every scored level of the environment folder(s) at ENV_DIR (an exported module's env/)."""

    ENV_DIR: ClassVar[Path | None] = None

    def load(self) -> Iterator[LevelTask]:
        config = self.config
        if self.ENV_DIR is None:
            raise UserError(f"{type(self).__name__}.ENV_DIR: expected an environment folder, found none set")
        if config.split not in layout.LEVEL_SPLITS:
            raise UserError(f"split: expected one of {', '.join(layout.LEVEL_SPLITS)}, found {config.split!r}")
        envs = [Environment(e.path) for e in layout.find_envs(self.ENV_DIR)]
        if not envs:
            raise UserError(f"{self.ENV_DIR}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) "
                            "or a folder holding some, found none")
        found = False
        for env in envs:
            if config.skin is not None and config.skin not in env.skins():
                raise UserError(f"skin: expected one of {', '.join(env.skins()) or '(none)'} for {env.name}, "
                                f"found {config.skin!r}")
            system = with_system({"instruction": env.instruction, "action_space": env.action_text,
                                  "actions": [a.name for a in env.actions]})["system"]
            for level, max_reward, note in env.scored_levels(config.split, config.max_levels, "the environment",
                                                             config.difficulty, config.curriculum):
                found = True
                profile = env.difficulty(level)
                yield LevelTask(LevelData(
                    id=f"{env.name}/{level}", name=f"{env.name} {layout.level_key(level)}", system_prompt=system,
                    env=str(env.path), level=level, split=config.split, max_reward=max_reward, max_note=note,
                    skin=config.skin, difficulty=profile["score"] if profile else None,
                    difficulty_band=profile["band"] if profile else None, difficulty_profile=profile), config.task)
        if not found:
            raise UserError(f"{self.ENV_DIR}: expected level files under {layout.LEVEL_SPLITS[config.split]}/ with a "
                            "usable max reward, found none")


class ChatConfig(vf.HarnessConfig):
    pass


class ChatHarness(vf.Harness[ChatConfig]):
    """One chat completion per turn, made in this process through the interception endpoint (the
    contract verifiers' Harness.launch names: every model call goes through `endpoint`)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # each turn is the whole conversation so far, sent again
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **kwargs) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class PlayConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class PlayEnv(vf.Env[PlayConfig]):
    """A level played by the model, turn by turn, in its own sandbox worker (see the module docstring)."""

    limits: ClassVar[Limits] = Limits()

    async def run(self, task: LevelTask, agents: vf.Agents) -> None:
        episode = _Episode(Environment(task.data.env), task.data, self.limits)
        first = await episode.start()
        try:
            async with agents.player.interaction(task) as interaction:
                message = episode.prompt(first)
                while episode.tracker.stop_reason is None:
                    segment = await interaction.turn(message)
                    if segment.terminated:  # verifiers' own limit (turns, tokens, time) ended the rollout
                        break
                    message = await episode.turn(segment.last_reply)
                interaction.trace.info[EPISODE] = await episode.finish(agents.player.config.model or "")
        finally:
            await episode.close()


def load_environment(module: str, split: str = "test", skin: str | None = None, max_levels: int | None = None,
                     **env: Any) -> PlayEnv:
    """The verifiers environment of an exported module (its name, e.g. "envforge_crate_dock"), for
    in-process evaluation (`async with env.serving(): await env.run_episode(task, ctx)`); `env`: more
    of its EnvConfig (e.g. `player={"max_turns": 40}`)."""
    config = PlayConfig.model_validate({**env, "taskset": {"id": module, "split": split, "skin": skin,
                                                           "max_levels": max_levels}})
    return PlayEnv(config)


class _Episode:
    """One rollout's episode: its worker, and evaluate's tracker of turns, limits and reward."""

    def __init__(self, env: Environment, data: LevelData, limits: Limits):
        self.env, self.data = env, data
        self.tracker = Tracker(limits, env.max_steps, data.max_reward, env.spec.actions, max_note=data.max_note)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envforge-verifiers")
        self.session: WorkerSession | None = None
        self.observation: Any = None
        self.feedback: Any = None

    async def start(self):
        loop = asyncio.get_running_loop()
        try:
            client = await loop.run_in_executor(self.executor, lambda: EnvClient.start(
                self.env.spec, SandboxLimits(call_seconds=10.0), skin=self.data.skin))
            self.session = WorkerSession(client, self.executor)
            first = await self.session.reset(self.data.level)
        except SandboxFailure as f:
            self.tracker.stop(env_fault(f), str(f))
            return None
        self.tracker.start(first)
        self.observation = first.observation
        return first

    def prompt(self, first) -> str:
        if first is None:
            return f"The environment failed to start: {self.tracker.stop_detail[:500]}"
        return self._turn_prompt()

    def _turn_prompt(self) -> str:
        turn = Turn(self.tracker.turns + 1, self.tracker.max_steps, self.observation, self.feedback,
                    self.tracker.recent(HISTORY))
        return agent_turn(turn)["prompt"]

    async def turn(self, reply: str) -> str:
        """Count the model's reply as evaluate counts a turn; the next prompt."""
        try:
            action = parse_reply(reply, self.env)
        except ValueError as e:
            self.tracker.decided(Decision(error="format", message=str(e), reply=reply[:MAX_REPLY]))
        else:
            self.tracker.decided(Decision(action=action, reply=reply[:MAX_REPLY]))
            try:
                out = await self.session.step(action)
            except SandboxFailure as f:
                self.tracker.stop(env_fault(f), str(f))
            else:
                self.tracker.stepped(action, out)
                self.observation, self.feedback = out.observation, out.last_action_result
        return self._turn_prompt()

    async def finish(self, model: str) -> dict:
        if self.tracker.stop_reason is None:
            self.tracker.stop("agent_stopped", "the rollout ended before the episode did (verifiers' own limit)")
        record = self.tracker.record(env=self.env.spec.name, level=self.data.level, run=0, agent="verifiers",
                                     model=str(model), split=self.data.split, tags=self.env.spec.tags)
        return record.to_dict()

    async def close(self) -> None:
        if self.session is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self.executor, self.session.env.close)
            self.session = None
        self.executor.shutdown(wait=False)


def parse_reply(reply: str, env: Environment) -> dict:
    """A model reply as an action: the dictionary in its last <action></action> block (as evaluate's
    ReAct agent reads it), else the whole reply as `envforge play` reads a typed action."""
    if "<action" in reply.lower():
        try:
            return parse_action(reply)
        except FormatError as e:
            raise ValueError(str(e)) from None
    return env.parse_action(reply.strip())
