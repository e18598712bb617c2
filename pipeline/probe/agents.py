"""Who answers probe items: random and oracle baselines, and a model.

An agent answers three questions (all async, so a model agent can call the model):
    choose(item)        -> index of the candidate it thinks is the next observation (or None)
    plan(item)          -> the actions it would take, executed as written
    notice(item, seen)  -> called after each step `seen` = 1..T of a change item with
                           observations[0..seen] revealed; the step it thinks showed the change
                           (<= seen) to stop, or None to watch on
"""
from __future__ import annotations

import json
import random
import re
from typing import Protocol

from envforge.pipeline import safe_io
from envforge.pipeline.llm import LLMClient, Message
from envforge.pipeline.located import LocatedError
from envforge.pipeline.probe.items import ChangeItem, PlanItem, PredictItem
from envforge.pipeline.prompts import render


class ProbeAgent(Protocol):
    name: str

    async def choose(self, item: PredictItem) -> int | None: ...

    async def plan(self, item: PlanItem) -> list[dict]: ...

    async def notice(self, item: ChangeItem, seen: int) -> int | None: ...


class RandomProbeAgent:
    """Uniform choices: a random candidate, a random plan of the planner's length, a random step."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self._steps: dict[str, int] = {}

    async def choose(self, item: PredictItem) -> int:
        return self.rng.randrange(len(item.candidates))

    async def plan(self, item: PlanItem) -> list[dict]:
        return [self.rng.choice(item.action_choices) for _ in range(item.planner_length)]

    async def notice(self, item: ChangeItem, seen: int) -> int | None:
        if item.id not in self._steps:
            self._steps[item.id] = self.rng.randint(1, len(item.actions))
        return self._steps[item.id] if seen >= self._steps[item.id] else None


class OracleProbeAgent:
    """The answer keys: what a perfect world model would answer (and the planner's plan)."""

    name = "oracle"

    async def choose(self, item: PredictItem) -> int:
        return item.answer

    async def plan(self, item: PlanItem) -> list[dict]:
        return list(item.planner_plan)

    async def notice(self, item: ChangeItem, seen: int) -> int | None:
        return item.t_star if seen >= item.t_star else None


class ModelProbeAgent:
    """Asks the model, with the templates in templates/probe/; an unreadable answer counts as none."""

    def __init__(self, client: LLMClient, max_tokens: int = 2048, temperature: float | None = None):
        self.client, self.max_tokens, self.temperature = client, max_tokens, temperature
        self.name = f"model {client.spec}"
        self._conversations: dict[str, list[Message]] = {}

    async def _ask(self, item, messages: list[Message]) -> str:
        response = await self.client.complete(messages, theme=item.env, stage=f"probe:{item.kind}",
                                              max_tokens=self.max_tokens, temperature=self.temperature)
        return response.text

    def _system(self, item) -> Message:
        return Message.system(render("probe/system.j2", instruction=item.instruction or "(none given)"), cache=True)

    async def choose(self, item: PredictItem) -> int | None:
        text = await self._ask(item, [self._system(item), Message.user(render(
            "probe/predict.j2", observation=item.observation, actions=[_action(a) for a in item.actions],
            candidates=item.candidates))])
        found = re.findall(r"<answer>\s*(\d+)\s*</answer>", text)
        return int(found[-1]) if found else None

    async def plan(self, item: PlanItem) -> list[dict]:
        text = await self._ask(item, [self._system(item), Message.user(render(
            "probe/plan.j2", observation=item.observation, target_text=item.target_text,
            target_observation=item.target_observation, max_length=item.max_length,
            action_choices=[_action(a) for a in item.action_choices]))])
        found = re.findall(r"<plan>(.*?)</plan>", text, re.S)
        try:
            plan = safe_io.parse_json(found[-1], "the plan") if found else []
        except LocatedError:
            return []
        return [a for a in plan if isinstance(a, dict)][:item.max_length] if isinstance(plan, list) else []

    async def notice(self, item: ChangeItem, seen: int) -> int | None:
        messages = self._conversations.setdefault(item.id, [self._system(item)])
        messages.append(Message.user(render("probe/change.j2", seen=seen, observations=item.observations,
                                            action=_action(item.actions[seen - 1]))))
        text = await self._ask(item, messages)
        messages.append(Message.assistant(text))
        found = re.findall(r"<change>\s*(\d+)\s*</change>", text)
        if not found:
            return None
        self._conversations.pop(item.id, None)
        return min(int(found[-1]), seen)


def _action(action: dict) -> str:
    return json.dumps(action, sort_keys=True)


def make_agent(name: str, client: LLMClient | None = None, seed: int = 0) -> ProbeAgent:
    if name == "random":
        return RandomProbeAgent(seed)
    if name in ("oracle", "planner"):
        return OracleProbeAgent()
    if client is None:
        raise ValueError(f"agent {name!r}: expected random, oracle (or planner), or a model agent with a client")
    return ModelProbeAgent(client)
