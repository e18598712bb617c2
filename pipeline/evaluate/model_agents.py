"""What every model-driven agent shares, and the `tools` agent (native tool calls).

Each turn an agent sees the same thing, rendered from templates/agents/: the environment's
instruction (and, for react, its action space text) as the system prompt (`agent_env`); the
recent turns with the environment's feedback on each, the observation, and the last action's
result as the user prompt (`agent_turn`). Each turn is one stateless call, as in the paper's
agent, so a long episode costs the same per step as a short one.

    react   pipeline/evaluate/react.py (run by hosted.py): the action as a dictionary inside
            <action></action>, reasoning in <thinking_memory>
    tools   ToolsAgent below: one tool call whose parameters are the action's typed parameters

A reply that holds no action of the declared space is a format error (`decision_of`): counted,
shown to the agent on the next turn, never a crash. A model call that fails after the client's
retries ends the episode (model_error); one that a budget cap refused ends it too (budget).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from envforge.pipeline.evaluate.context import EpisodeContext
from envforge.pipeline.evaluate.episode import Decision, Turn
from envforge.pipeline.evaluate.react import clip
from envforge.pipeline.llm import BudgetExceeded, LLMClient, LLMError, Message, Response, ToolSpec
from envforge.pipeline.prompts import render

STAGE = "evaluate"


@dataclass(frozen=True)
class ModelOptions:
    max_tokens: int = 4096
    temperature: float | None = None
    history: int = 10  # recent turns shown each step


class TurnError(Exception):
    """A model call of a turn that brought no answer: `kind` "budget" (a cap refused it; `scope`: the
    ledger's scope of that cap, "run" or "theme", the environment's own) or "model"."""

    def __init__(self, kind: str, message: str, scope: str = ""):
        super().__init__(message)
        self.kind, self.scope = kind, scope


def agent_env(ctx: EpisodeContext, instruction: str | None = None) -> dict:
    """What an agent knows of its environment (react.py's `env`), with the ReAct system prompt.
    `instruction`: shown in place of the environment's own (a learned prompt, envforge learn)."""
    env = ctx.env
    return with_system({"name": env.name, "instruction": env.instruction if instruction is None else instruction,
                        "action_space": env.action_space, "actions": [a.name for a in env.actions],
                        "max_steps": ctx.max_steps})


def with_system(env: dict, template: str = "agents/react_system.j2") -> dict:
    example = env["actions"][0] if env.get("actions") else "<action_name>"
    system = render(template, instruction=env["instruction"], action_space=env.get("action_space", ""),
                    example_name=example)
    return {**env, "system": system}


def agent_turn(turn: Turn | dict) -> dict:
    """A turn as an agent gets it (react.py's `turn`), with its prompt (templates/agents/react_step.j2)."""
    if isinstance(turn, Turn):
        turn = {"step": turn.step, "max_steps": turn.max_steps, "observation": turn.observation,
                "last_action_result": turn.last_action_result, "history": turn.history}
    result = turn.get("last_action_result")
    if result is None or result == "" or str(result) in str(turn["observation"]):
        result = None  # the observation already shows it
    prompt = render("agents/react_step.j2", history=[_shown(t) for t in turn["history"]],
                    observation=turn["observation"], last_action_result=result, step=turn["step"],
                    max_steps=turn["max_steps"])
    return {**turn, "prompt": prompt}


async def call_model(ctx: EpisodeContext, client: LLMClient, options: ModelOptions, messages: list[Message],
                     spent: dict, tools: list[ToolSpec] | None = None, max_tokens: int | None = None) -> Response:
    """One model call of an agent's turn; what it cost, its prompt and its reply are added to
    `spent` (the Decision's fields). Raises TurnError when no answer came."""
    spent["prompt"] = next((m.content for m in reversed(messages) if m.role == "user"), None)
    try:
        response = await client.complete(messages, theme=ctx.env.name, stage=STAGE, tools=tools or [],
                                         max_tokens=min(max_tokens or options.max_tokens, options.max_tokens),
                                         temperature=options.temperature, sample=ctx.run)
    except BudgetExceeded as e:
        raise TurnError("budget", f"{e.scope}: {e}", e.scope) from None
    except LLMError as e:
        spent["calls"] = spent.get("calls", 0) + 1
        raise TurnError("model", f"{type(e).__name__}: {e}") from None
    usage = response.usage
    for key, value in (("calls", 1), ("retries", len(response.retries)), ("dollars", response.cost_usd),
                       ("tokens_in", usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens),
                       ("tokens_out", usage.output_tokens)):
        spent[key] = spent.get(key, 0) + value
    spent["reply"] = response.text
    return response


def decision_of(out, names: set[str], spent: dict) -> Decision:
    """What an agent's act() returned, as a Decision: an action of the declared space, or a
    format error saying what was expected and found."""
    if not isinstance(out, dict):
        return Decision(error="format", message=f"expected act() to return a dictionary, found {out!r:.120}", **spent)
    thought = str(out.get("thought") or "")
    if out.get("error") is not None or out.get("action") is None:
        message = str(out.get("message") or out.get("error") or "act() returned no action")
        return Decision(error="format", message=message, thought=thought, **spent)
    action = out["action"]
    if not (isinstance(action, dict) and isinstance(action.get("action"), str)
            and isinstance(action.get("params", {}), dict)):
        return Decision(
            error="format",
            message=f'expected {{"action": NAME, "params": {{...}}}}, found {action!r:.120}',
            thought=thought,
            **spent,
        )
    action = {"action": action["action"], "params": dict(action.get("params") or {})}
    if names and action["action"] not in names:
        return Decision(error="format", message=f"unknown action {action['action']!r}; expected one of "
                                                f"{', '.join(sorted(names))}", thought=thought, **spent)
    return Decision(action=action, thought=thought, **spent)


class ToolsAgent:
    """Each action of the environment is a tool with typed parameters (EPOCH-Bench's approach)."""

    def __init__(self, ctx: EpisodeContext, client: LLMClient, options: ModelOptions, instruction: str | None = None):
        self.ctx, self.client, self.options = ctx, client, options
        self.names = {a.name for a in ctx.env.actions}
        self.system = with_system(agent_env(ctx, instruction), "agents/tools_system.j2")["system"]
        self.tools = [ToolSpec(t["name"], t["description"], t["parameters"]) for t in ctx.env.tools]

    async def act(self, turn: Turn) -> Decision:
        spent: dict = {}
        messages = [Message.system(self.system), Message.user(agent_turn(turn)["prompt"])]
        try:
            response = await call_model(self.ctx, self.client, self.options, messages, spent, self.tools)
        except TurnError as e:
            return Decision(error=e.kind, message=str(e), budget_scope=e.scope, **spent)
        calls = [{"name": c.name, "arguments": c.arguments} for c in response.tool_calls]
        spent["reply"] = response.text + ("\n" + json.dumps({"tool_calls": calls}) if calls else "")
        if not response.tool_calls:
            found = clip(response.text) or "an empty reply"
            out = {"error": "format", "message": f"expected a call to one of the tools, found no tool call but {found}"}
        else:
            call = response.tool_calls[0]  # one action per turn: later calls are ignored
            out = ({"error": "format", "message": f"the call of {clip(call.name)}: {call.problem}"} if call.problem
                   else {"action": {"action": call.name, "params": dict(call.arguments)},
                         "thought": response.text.strip()})
        return decision_of(out, self.names, spent)


def _shown(entry: dict) -> dict:
    """A tracker turn as the history template shows it."""
    action = entry.get("action")
    result = entry.get("result")
    if action is not None and result is None and entry.get("invalid"):
        result = f"invalid: {entry['invalid']}"
    return {"step": entry["step"], "action": json.dumps(action) if action is not None else None,
            "result": result, "reward": entry.get("reward") or 0, "error": entry.get("error") or ""}
