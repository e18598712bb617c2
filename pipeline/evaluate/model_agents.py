"""The model-driven agents: `react` (AutoEnv Appendix C.3) and `tools` (native tool calls).

Both see the same thing each turn, rendered from templates/agents/: the environment's
instruction (and, for react, its action space text) as the system prompt; the recent turns with
the environment's feedback on each, the observation, and the last action's result as the user
prompt. Each turn is one stateless call, as in the paper's agent, so a long episode costs the
same per step as a short one. They differ only in how the action comes back: react writes it as
a dictionary inside <action></action> (reasoning in <thinking_memory>), tools calls one tool
whose parameters are the action's typed parameters (schemas from the DSL).

A reply that holds no action of the declared space is a format error: counted, shown to the
agent on the next turn, never a crash. A model call that fails after the client's retries ends
the episode (model_error); one that a budget cap refused ends it too (budget).
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

from pipeline.evaluate.context import EpisodeContext
from pipeline.evaluate.episode import Decision, Turn
from pipeline.llm import BudgetExceeded, LLMClient, LLMError, Message, Response, ToolSpec
from pipeline.prompts import render

STAGE = "evaluate"
_ACTION_BLOCK = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_THOUGHT_BLOCK = re.compile(r"<thinking_memory>(.*?)</thinking_memory>", re.S | re.I)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*")


@dataclass(frozen=True)
class ModelOptions:
    max_tokens: int = 4096
    temperature: float | None = None
    history: int = 10  # recent turns shown each step


class FormatError(ValueError):
    """The reply holds no action; the message says what was expected and what was found."""


class ModelAgent:
    system_template = ""

    def __init__(self, ctx: EpisodeContext, client: LLMClient, options: ModelOptions, instruction: str | None = None):
        """`instruction`: shown in place of the environment's own (a learned prompt, envforge learn)."""
        self.ctx, self.client, self.options = ctx, client, options
        self.names = {a.name for a in ctx.env.space}
        example = ctx.env.space[0].name if ctx.env.space else "<action_name>"
        instruction = ctx.env.instruction if instruction is None else instruction
        self.system = render(self.system_template, instruction=instruction,
                             action_space=ctx.env.action_space, example_name=example)

    async def act(self, turn: Turn) -> Decision:
        prompt = render("agents/react_step.j2", history=[_shown(t) for t in turn.history],
                        observation=turn.observation, last_action_result=_feedback(turn),
                        step=turn.step, max_steps=turn.max_steps)
        try:
            response = await self.client.complete(
                [Message.system(self.system), Message.user(prompt)], theme=self.ctx.env.name, stage=STAGE,
                tools=self.tools(), max_tokens=self.options.max_tokens, temperature=self.options.temperature,
                sample=self.ctx.run)
        except BudgetExceeded as e:
            return Decision(error="budget", message=f"{e.scope}: {e}", prompt=prompt)
        except LLMError as e:
            return Decision(error="model", message=f"{type(e).__name__}: {e}", prompt=prompt, calls=1)
        usage = response.usage
        cost = dict(prompt=prompt, reply=self.reply_text(response), calls=1, retries=len(response.retries),
                    tokens_in=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
                    tokens_out=usage.output_tokens, dollars=response.cost_usd)
        try:
            action, thought = self.read(response)
            if self.names and action["action"] not in self.names:
                raise FormatError(f"unknown action {action['action']!r}; expected one of {', '.join(sorted(self.names))}")
        except FormatError as e:
            return Decision(error="format", message=str(e), **cost)
        return Decision(action=action, thought=thought, **cost)

    def tools(self) -> list[ToolSpec]:
        return []

    def read(self, response: Response) -> tuple[dict, str]:
        raise NotImplementedError

    def reply_text(self, response: Response) -> str:
        return response.text


class ReActAgent(ModelAgent):
    system_template = "agents/react_system.j2"

    def read(self, response: Response) -> tuple[dict, str]:
        return parse_action(response.text), thought_of(response.text)


class ToolsAgent(ModelAgent):
    system_template = "agents/tools_system.j2"

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(t["name"], t["description"], t["parameters"]) for t in self.ctx.env.tools]

    def read(self, response: Response) -> tuple[dict, str]:
        if not response.tool_calls:
            found = _clip(response.text) or "an empty reply"
            raise FormatError(f"expected a call to one of the tools, found no tool call but {found}")
        call = response.tool_calls[0]  # one action per turn: later calls are ignored
        return {"action": call.name, "params": dict(call.arguments)}, response.text.strip()

    def reply_text(self, response: Response) -> str:
        calls = [{"name": c.name, "arguments": c.arguments} for c in response.tool_calls]
        return response.text + ("\n" + json.dumps({"tool_calls": calls}) if calls else "")


def parse_action(text: str | None) -> dict:
    """The action in a ReAct reply: the dictionary inside the last <action></action> (or after
    an unclosed <action>, or, with no tag, the last dictionary with an "action" key anywhere).
    Tolerates code fences, Python-dict quoting (single quotes, True/None, trailing commas) and
    prose around the dictionary. Raises FormatError saying what was expected and found."""
    if not text or not text.strip():
        raise FormatError("expected <action>{\"action\": ..., \"params\": {...}}</action>, found an empty reply")
    blocks = _ACTION_BLOCK.findall(text)
    if blocks:
        candidates = _objects(_FENCE.sub("", blocks[-1]))
    elif "<action>" in text.lower():
        candidates = _objects(_FENCE.sub("", text[text.lower().rindex("<action>") + len("<action>"):]))
    else:
        candidates = _objects(_FENCE.sub("", text))[::-1]
    for candidate in candidates:
        data = _load(candidate)
        if isinstance(data, dict) and "action" in data:
            return _normalized(data)
    where = "inside <action></action>" if blocks else "in the reply"
    raise FormatError(f"expected a dictionary with an \"action\" key {where}, found {_clip(text)}")


def thought_of(text: str | None) -> str:
    if not text:
        return ""
    block = _THOUGHT_BLOCK.search(text)
    if block:
        return block.group(1).strip()
    return re.split(r"<action>", text, flags=re.I)[0].strip()


def _normalized(data: dict) -> dict:
    name = data["action"]
    if not isinstance(name, str) or not name.strip():
        raise FormatError(f"expected the action's name as a string, found {name!r}")
    params = data.get("params", data.get("parameters"))
    if params is None and "params" not in data and "parameters" not in data:
        # {"action": "move", "direction": "north"}: the other keys are the parameters.
        params = {k: v for k, v in data.items() if k not in ("action", "thought", "reasoning")}
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise FormatError(f"expected params as a dictionary, found {params!r}")
    return {"action": name.strip(), "params": params}


def _objects(text: str) -> list[str]:
    """Every top-level balanced {...} in `text`, in order (braces inside strings ignored)."""
    out, depth, start, quote, escaped = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'" and depth:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
    return out


def _load(candidate: str):
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    try:
        return ast.literal_eval(candidate)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    try:  # JSON literals in a Python-quoted dict: {'action': 'x', 'params': {'on': true}}
        return ast.literal_eval(re.sub(r"\b(true|false|null)\b",
                                       lambda m: {"true": "True", "false": "False", "null": "None"}[m.group(1)],
                                       candidate))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def _shown(entry: dict) -> dict:
    """A tracker turn as the history template shows it."""
    action = entry.get("action")
    result = entry.get("result")
    if action is not None and result is None and entry.get("invalid"):
        result = f"invalid: {entry['invalid']}"
    return {"step": entry["step"], "action": json.dumps(action) if action is not None else None,
            "result": result, "reward": entry.get("reward") or 0, "error": entry.get("error") or ""}


def _feedback(turn: Turn):
    """The last action's result, unless the observation already shows it."""
    result = turn.last_action_result
    if result is None or result == "" or str(result) in str(turn.observation):
        return None
    return result


def _clip(text: str | None, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    if not text:
        return ""
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")
