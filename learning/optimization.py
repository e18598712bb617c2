"""Optimization (AutoEnv §4.2, F_o): from a selected candidate, a new one with its target
component rewritten.

    signal    templates/learn/signal_<signal>.j2 over the parent's training trajectories (its
              worst, best and middle episodes) and its current component -> a plain-text analysis
    rewrite   rewrite_prompt.j2 -> the new instruction, inside <instruction></instruction>
              rewrite_agent_code.j2 -> the new agent.py, in a ```python block; the code must pass
              agent_code_check.check_code in the sandbox before it is evaluated; if it fails, the
              rewrite is asked once more with the failure, then the candidate is rejected
              (pipeline/llm/ask.py's loop; the rejection names how it ended)

Both calls go to the optimizer model; what they cost is the candidate's `spent`.
"""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from envforge.learning.agent_code_check import check_code
from envforge.learning.calls import ANALYZE, REWRITE, StageClient, add_usage
from envforge.learning.candidates import CANDIDATES, Candidate, Pool, agent_source
from envforge.learning.methods import Method
from envforge.learning.selection import spread
from envforge.learning.settings import Settings
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.evaluate.hosted import MAX_CALLS_PER_TURN, write_code
from envforge.pipeline.evaluate.records import Records
from envforge.pipeline.kinds import TrajectoryLine, TurnLine
from envforge.pipeline.llm import Message, Response
from envforge.pipeline.llm.ask import ask_until_valid
from envforge.pipeline.prompts import render
from envforge.pipeline.sandbox import WorkerPool

CODE_ATTEMPTS = 2
SHOWN_TURNS = (10, 4)  # of a long episode, the first and the last turns shown
CLIP = {"observation": 700, "thought": 300, "result": 200}
_INSTRUCTION = re.compile(r"<instruction>(.*?)(?:</instruction>|$)", re.S | re.I)
_PYTHON = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
LABELS = {"prompt": "instruction (prompt)", "agent_code": "agent code (agent.py)"}


@dataclass
class Optimizer:
    client: object  # the optimizer model's LLMClient
    out: Path  # the study folder
    settings: Settings
    agents: WorkerPool

    async def __call__(self, parent: Candidate, method: Method, iteration: int, pool: Pool, target: EnvSpec,
                       run: Path, theme: str) -> Candidate:
        child = Candidate(pool.new_id(), iteration, parent.id, replace(parent.components), changed=method.component)
        episodes = read_episodes(self.out / parent.evaluations["train"].records, self.settings.signal_episodes)
        current = parent.components.prompt if method.component == "prompt" else agent_source(parent.components)
        task = render(method.signal_template, env_name=target.name, component_label=LABELS[method.component],
                      component=current, trajectories=render("learn/trajectories.j2", episodes=episodes))
        child.analysis = (await self._ask(ANALYZE, task, child, pool, theme)).text.strip()
        common = dict(env_name=target.name, analysis=child.analysis, signal=method.signal)
        if method.component == "prompt":
            reply = await self._ask(REWRITE, render("learn/rewrite_prompt.j2", prompt=current,
                                                    action_space=target.action_space, **common), child, pool, theme)
            found = _INSTRUCTION.findall(reply.text)
            child.components.prompt = (found[-1] if found else reply.text).strip()
            if not child.components.prompt:
                child.status, child.rejection = "rejected", "the rewrite returned an empty instruction"
            return child

        async def ask(last: Response | None, failure: str) -> Response:
            return await self._ask(REWRITE, render("learn/rewrite_agent_code.j2", code=current, failure=failure,
                                                   max_calls=MAX_CALLS_PER_TURN, **common), child, pool, theme)

        async def check(code: str) -> str:
            folder = write_code(run / CANDIDATES / child.id, code)
            child.components.agent_code = code  # a rejected candidate keeps what was tried, for people to read
            return await asyncio.to_thread(check_code, folder, *self._check_inputs(child, target, episodes))

        asked = await ask_until_valid(ask, python_block, check, CODE_ATTEMPTS,
                                      "expected the complete agent.py in one ```python block, found none in the reply")
        asked.raise_budget()
        if not asked.accepted:
            child.status, child.rejection = "rejected", f"failed its check ({asked.exit_status}): {asked.problem}"
        return child

    async def _ask(self, stage: str, task: str, child: Candidate, pool: Pool, theme: str) -> Response:
        client = StageClient(self.client, theme, stage, pool.counters)
        response = await client.complete([Message.system(render("learn/system.j2")), Message.user(task)],
                                         max_tokens=self.settings.max_tokens, temperature=self.settings.temperature)
        add_usage(child.spent, response)
        return response

    def _check_inputs(self, child: Candidate, target: EnvSpec, episodes: list[dict]) -> tuple:
        """The check's sample turn (the first observation the parent saw) and canned reply."""
        first = next((e["first_observation"] for e in episodes if e["first_observation"]), "")
        steps = target.max_steps
        env = {"name": target.name, "instruction": child.components.prompt, "action_space": target.action_space,
               "actions": [a.name for a in target.actions], "max_steps": steps}
        turn = {"step": 1, "max_steps": steps, "observation": first, "last_action_result": None, "history": []}
        action = (target.actions.candidates() or [{"action": "noop", "params": {}}])[0]
        reply = f"<thinking_memory>A check of the agent code.</thinking_memory>\n<action>{json.dumps(action)}</action>"
        return env, turn, reply, {a.name for a in target.actions}, self.agents


def python_block(text: str) -> str | None:
    """The longest ```python block of a reply (a reply may quote a snippet before the file)."""
    blocks = [b for b in _PYTHON.findall(text or "") if "class " in b]
    return max(blocks, key=len).strip() + "\n" if blocks else None


def read_episodes(folder: Path, count: int) -> list[dict]:
    """`count` episodes of an evaluation for the signal step: the worst, the best and those
    between, each as its outcome and its turns (long episodes: the first and last turns)."""
    records = sorted(Records(folder).all(), key=lambda r: (r.normalized if r.normalized is not None else -1.0,
                                                          r.level, r.run))
    out = []
    for r in spread(records[::-1], count):
        played = [x for _, x in files.lines(folder / r.trajectory, TrajectoryLine) if isinstance(x, TurnLine)]
        turns = [_turn(x) for x in played]
        head, tail = SHOWN_TURNS
        if len(turns) > head + tail + 1:
            turns = turns[:head] + [f"[... {len(turns) - head - tail} turns left out ...]"] + turns[-tail:]
        first = played[0].observation if played else None
        out.append({"level": r.level, "run": r.run, "total": r.total_reward, "max_reward": r.max_reward,
                    "first_observation": first,
                    "normalized": r.normalized, "steps": r.steps, "stop": r.stop_reason, "turns": turns})
    return out


def _turn(line: TurnLine) -> str:
    out = [f"[turn {line.step}] observation:", _clip(line.observation, "observation")]
    if line.thought:
        out.append(f"thought: {_clip(line.thought, 'thought')}")
    if line.action:
        result = _clip(line.result or line.invalid or "no feedback", "result")
        reward = f" (reward {line.reward})" if line.reward else ""
        out.append(f"action: {json.dumps(line.action)} -> {result}{reward}")
    else:
        out.append(f"no action: {line.message or line.error}")
    return "\n".join(out)


def _clip(value, kind: str) -> str:
    text = "" if value is None else str(value)
    limit = CLIP[kind]
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"
