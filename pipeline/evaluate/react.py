"""envforge's ReAct agent (AutoEnv Appendix C.3): the built-in `react` agent of `envforge evaluate`
and, as its source text, the starting agent code (c0) that `envforge learn`'s agent-code methods
rewrite. It is one self-contained file on purpose: learned versions of it run in the sandbox.

Its prompts are templates (templates/agents/react_system.j2, react_step.j2), rendered by envforge
outside this class and handed in as `env["system"]` and `turn["prompt"]`.

Contract (pipeline/evaluate/hosted.py drives it; learned code must keep it):

    Agent(env, llm)
        env:  {"name", "instruction", "action_space", "actions" (names), "max_steps",
               "system" (the system prompt, rendered from the instruction and action space)}
        llm(messages, max_tokens=None) -> str
              messages: [{"role": "system" | "user" | "assistant", "content": str}] or one string.
              The call is made by envforge outside the sandbox; it raises when no answer comes.
    act(turn) -> dict, once per turn
        turn: {"step", "max_steps", "observation", "last_action_result",
               "history": [{"step", "action", "result", "reward", "error", "invalid"}, ...],
               "prompt" (the turn's prompt: recent turns, the observation, the step count)}
        returns {"action": {"action": NAME, "params": {...}}, "thought": TEXT}
             or {"error": "format", "message": WHY} when the reply held no action.

Standard library only; no files, network, processes or threads. One object plays one episode,
so it may remember what it saw.
"""
import ast
import json
import re

_ACTION_BLOCK = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_THOUGHT_BLOCK = re.compile(r"<thinking_memory>(.*?)</thinking_memory>", re.S | re.I)
_FENCE = re.compile(r"`{3}[A-Za-z0-9_-]*")  # not written out: this file is shown in a fenced block
_JSON_LITERALS = {"true": "True", "false": "False", "null": "None"}


class FormatError(ValueError):
    """The reply holds no action; the message says what was expected and what was found."""


class Agent:
    def __init__(self, env, llm):
        self.env = env
        self.llm = llm
        self.system = env["system"]

    def act(self, turn):
        reply = self.llm([{"role": "system", "content": self.system}, {"role": "user", "content": turn["prompt"]}])
        try:
            action = parse_action(reply)
        except FormatError as e:
            return {"error": "format", "message": str(e)}
        return {"action": action, "thought": thought_of(reply)}


def parse_action(text):
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
    raise FormatError("expected a dictionary with an \"action\" key %s, found %s" % (where, clip(text)))


def thought_of(text):
    if not text:
        return ""
    block = _THOUGHT_BLOCK.search(text)
    if block:
        return block.group(1).strip()
    return re.split(r"<action>", text, flags=re.I)[0].strip()


def clip(text, limit=120):
    """`text` on one line, quoted, at most `limit` characters: how a message quotes a reply."""
    text = " ".join((text or "").split())
    if not text:
        return ""
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _normalized(data):
    name = data["action"]
    if not isinstance(name, str) or not name.strip():
        raise FormatError("expected the action's name as a string, found %r" % (name,))
    params = data.get("params", data.get("parameters"))
    if params is None and "params" not in data and "parameters" not in data:
        # {"action": "move", "direction": "north"}: the other keys are the parameters.
        params = {k: v for k, v in data.items() if k not in ("action", "thought", "reasoning")}
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise FormatError("expected params as a dictionary, found %r" % (params,))
    return {"action": name.strip(), "params": params}


def _objects(text):
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


def _load(candidate):
    """A dictionary literal as JSON, as Python, or as Python holding JSON's true/false/null."""
    loaders = (json.loads, ast.literal_eval,
               lambda c: ast.literal_eval(re.sub(r"\b(true|false|null)\b", lambda m: _JSON_LITERALS[m.group(1)], c)))
    for load in loaders:
        try:
            return load(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return None
