"""envforge environments as `verifiers` environments (pip install 'envforge-rl[verifiers]').

    import envforge.integrations.verifiers as ev
    env = ev.load_environment(path="generated_envs/reference/crate_dock", split="test", max_levels=5)
    # or, from the command line, an exported module (envforge export verifiers ENV_DIR --out DIR):
    #   vf-eval envforge_crate_dock -m MODEL -b http://127.0.0.1:8000/v1 -n 5

`load_environment` returns verifiers' multi-turn environment (`vf.MultiTurnEnv`, the library's
classic surface, verifiers 0.3). Each level of the split is a task row. A rollout starts a sandbox
worker for its level (the environment's code never runs in this process), shows the model the
prompts of envforge's ReAct agent (the instruction and action space, then each observation), and
reads every reply as an action: the dictionary in its last <action></action> block, as the ReAct
agent reads it, else the reply as `envforge play` reads a typed action (`move north`, JSON). The
episode runs under envforge evaluate's rules (pipeline.evaluate.episode.Tracker): the
environment's terminated/truncated, its step cap, and the stops after too many format errors,
invalid actions, loops or stagnant steps. The rubric's reward is the episode's normalized reward
(total / the level's certified max reward, clipped at 1), its `solved` metric 1 when the level's
max was reached: the numbers `envforge evaluate` reports for the same actions. An episode that
ended for a reason outside the model's play (the environment failed) scores 0 and says so in
`state["envforge_episode"]`.
"""
from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import verifiers as vf
from datasets import Dataset

from envforge.pipeline import layout
from envforge.pipeline.api.environment import Environment
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.context import WorkerSession
from envforge.pipeline.evaluate.episode import Decision, Limits, Tracker, Turn, env_fault
from envforge.pipeline.evaluate.model_agents import agent_turn, with_system
from envforge.pipeline.evaluate.react import FormatError, parse_action
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

EPISODE = "envforge_episode"  # the state key of the finished episode's record (evaluate's fields)
HISTORY = 10  # recent turns shown in each prompt, as evaluate's ReAct agent shows them


def load_environment(path: str | Path | None = None, split: str = "test", skin: str | None = None,
                     max_levels: int | None = None, **kwargs: Any) -> "EnvforgeMultiTurnEnv":
    """Every level of the environment folder(s) at `path` as a task row (see the module docstring).
    `kwargs` go to vf.MultiTurnEnv (e.g. `timeout_seconds`)."""
    if path is None:
        raise UserError("path: expected an environment folder or a folder holding some, found none given")
    if split not in layout.LEVEL_SPLITS:
        raise UserError(f"split: expected one of {', '.join(layout.LEVEL_SPLITS)}, found {split!r}")
    envs = [Environment(e.path) for e in layout.find_envs(path)]
    if not envs:
        raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) or a folder "
                        "holding some, found none")
    rows = []
    for env in envs:
        if skin is not None and skin not in env.skins():
            raise UserError(
                f"skin: expected one of {', '.join(env.skins()) or '(none)'} for {env.name}, found {skin!r}"
            )
        system = with_system({"instruction": env.instruction, "action_space": env.action_text,
                              "actions": [a.name for a in env.actions]})["system"]
        for level, max_reward, note in env.scored_levels(split, max_levels, "the environment"):
            rows.append({"prompt": [{"role": "system", "content": system}],
                         "answer": "", "task": env.name,
                         "info": json.dumps({"env": str(env.path), "level": level, "split": split,
                                             "max_reward": max_reward, "max_note": note, "skin": skin})})
    if not rows:
        raise UserError(f"{path}: expected level files under {layout.LEVEL_SPLITS[split]}/ with a usable max "
                        "reward, found none")
    return EnvforgeMultiTurnEnv(Dataset.from_list(rows), max(e.max_steps for e in envs), **kwargs)


def normalized_reward(state) -> float:
    """The episode's normalized reward, as evaluate reports it (0 when it has none: unscored, or
    no usable max; the record in state says why)."""
    record = state.get(EPISODE) or {}
    value = record.get("normalized")
    return float(value) if value is not None else 0.0


def solved(state) -> float:
    return 1.0 if (state.get(EPISODE) or {}).get("stop_reason") == "solved" else 0.0


class EnvforgeMultiTurnEnv(vf.MultiTurnEnv):
    """Levels of envforge environments, each rollout played in its own sandbox worker."""

    def __init__(self, dataset: Dataset, max_steps: int, limits: Limits = Limits(), **kwargs: Any):
        rubric = vf.Rubric(funcs=[normalized_reward], weights=[1.0])
        rubric.add_metric(solved)
        kwargs.setdefault("max_turns", max_steps + 1)  # a backstop: the tracker stops at the step cap first
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=rubric, **kwargs)
        self.limits = limits
        self._episodes: dict[str, _Episode] = {}

    async def setup_state(self, state, **kwargs):
        info = state["info"]
        env = Environment(info["env"])
        episode = _Episode(env, info, self.limits)
        self._episodes[_key(state)] = episode
        first = await episode.start()
        content = episode.prompt(first)
        state["prompt"] = list(state["prompt"]) + [{"role": "user", "content": content}]
        if episode.tracker.stop_reason is not None:  # the environment did not load or reset
            state["final_env_response"] = [{"role": "user", "content": episode.ending()}]
        return state

    async def env_response(self, messages, state, **kwargs):
        episode = self._episodes[_key(state)]
        reply = _content(messages[-1]) if messages else ""
        content = await episode.turn(reply)
        message = [{"role": "user", "content": content}]
        if episode.tracker.stop_reason is not None:
            state["final_env_response"] = message
        return message

    @vf.cleanup
    async def close_episode(self, state, **kwargs):
        episode = self._episodes.pop(_key(state), None)
        if episode is not None:
            state[EPISODE] = await episode.finish(state.get("model") or "")


def _key(state) -> str:
    return str(state["trajectory_id"])


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(getattr(p, "text", "")) for p in content)
    return str(content or "")


class _Episode:
    """One rollout's episode: its worker, and evaluate's tracker of turns, limits and reward."""

    def __init__(self, env: Environment, info: dict, limits: Limits):
        self.env, self.info = env, info
        self.tracker = Tracker(limits, env.max_steps, info.get("max_reward"), env.spec.actions,
                               max_note=info.get("max_note") or "")
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envforge-verifiers")
        self.session: WorkerSession | None = None
        self.observation: Any = None
        self.feedback: Any = None

    async def start(self):
        loop = asyncio.get_running_loop()
        try:
            client = await loop.run_in_executor(self.executor, lambda: EnvClient.start(
                self.env.spec, SandboxLimits(call_seconds=10.0), skin=self.info.get("skin")))
            self.session = WorkerSession(client, self.executor)
            first = await self.session.reset(self.info["level"])
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
        """Count the model's reply as evaluate counts a turn; the next prompt, or how it ended."""
        try:
            action = parse_reply(reply, self.env)
        except ValueError as e:
            self.tracker.decided(Decision(error="format", message=str(e), reply=reply[:20_000]))
        else:
            self.tracker.decided(Decision(action=action, reply=reply[:20_000]))
            try:
                out = await self.session.step(action)
            except SandboxFailure as f:
                self.tracker.stop(env_fault(f), str(f))
            else:
                self.tracker.stepped(action, out)
                self.observation, self.feedback = out.observation, out.last_action_result
        if self.tracker.stop_reason is not None:
            return self.ending()
        return self._turn_prompt()

    def ending(self) -> str:
        t = self.tracker
        return (f"{self.observation if self.observation is not None else ''}\n\nThe episode ended: {t.stop_reason}"
                f"{': ' + t.stop_detail[:500] if t.stop_detail else ''}. Total reward {t.total:g}.").strip()

    async def finish(self, model: str) -> dict:
        if self.session is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self.executor, self.session.env.close)
        self.executor.shutdown(wait=False)
        if self.tracker.stop_reason is None:
            self.tracker.stop("agent_stopped", "the rollout ended before the episode did (verifiers' own limit)")
        record = self.tracker.record(env=self.env.spec.name, level=self.info["level"], run=0, agent="verifiers",
                                     model=str(model), split=self.info["split"], tags=self.env.spec.tags)
        return record.to_dict()


def parse_reply(reply: str, env: Environment) -> dict:
    """A model reply as an action: the dictionary in its last <action></action> block (as evaluate's
    ReAct agent reads it), else the whole reply as `envforge play` reads a typed action."""
    if "<action" in reply.lower():
        try:
            return parse_action(reply)
        except FormatError as e:
            raise ValueError(str(e)) from None
    return env.parse_action(reply.strip())
