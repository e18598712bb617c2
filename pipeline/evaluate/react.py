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
import re

from envforge.pipeline import safe_io
from envforge.pipeline.located import LocatedError

_ACTION_TAG = re.compile(r"<(/?)action>", re.I)
_THOUGHT_OPEN = re.compile(r"<thinking_memory>", re.I)
_THOUGHT_CLOSE = re.compile(r"</thinking_memory>", re.I)
_FENCE = re.compile(r"`{3}[A-Za-z0-9_-]*")  # not written out: this file is shown in a fenced block
_JSON_LITERALS = {"true": "True", "false": "False", "null": "None"}
# The longest reply parsed: envforge's reply cap at the default max_tokens of 4096 (32 characters
# a token plus 1,024; pipeline/llm/trust.py). Parsing is linear in the reply, and at most
# MAX_CANDIDATES dictionaries are tried.
MAX_REPLY_CHARS = 4096 * 32 + 1024
MAX_CANDIDATES = 32


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
    if len(text) > MAX_REPLY_CHARS:
        raise FormatError(
            "expected a reply of at most %d characters, found %d: %s" % (MAX_REPLY_CHARS, len(text), clip(text))
        )
    blocks, last_open = _action_blocks(text)
    if blocks:
        candidates = _objects(_FENCE.sub("", blocks[-1]))[:MAX_CANDIDATES]
    elif last_open >= 0:
        candidates = _objects(_FENCE.sub("", text[last_open:]))[:MAX_CANDIDATES]
    else:
        candidates = _objects(_FENCE.sub("", text))[-MAX_CANDIDATES:][::-1]
    for candidate in candidates:
        data = _load(candidate)
        if isinstance(data, dict) and "action" in data:
            return _normalized(data)
    where = "inside <action></action>" if blocks else "in the reply"
    raise FormatError("expected a dictionary with an \"action\" key %s, found %s" % (where, clip(text)))


def thought_of(text):
    if not text:
        return ""
    text = text[:MAX_REPLY_CHARS]
    opening = _THOUGHT_OPEN.search(text)
    closing = _THOUGHT_CLOSE.search(text, opening.end()) if opening else None
    if closing:
        return text[opening.end():closing.start()].strip()
    action = _ACTION_TAG.search(text)
    return (text[:action.start()] if action else text).strip()


def _action_blocks(text):
    """The texts of the <action></action> blocks in order (an opening tag inside a block is part
    of it), and where the text after the last opening tag starts (-1: there is none). One pass."""
    blocks, start, last_open = [], -1, -1
    for tag in _ACTION_TAG.finditer(text):
        if not tag.group(1):
            last_open = tag.end()
            if start < 0:
                start = tag.end()
        elif start >= 0:
            blocks.append(text[start:tag.start()])
            start = -1
    return blocks, last_open


def clip(text, limit=120):
    """`text` on one line, quoted, at most `limit` characters: how a message quotes a reply."""
    text = " ".join((text or "")[:limit * 16].split())
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
    if safe_io.too_deep(candidate):  # no parser (nor Python's, which recurses) is given it
        return None
    loaders = (lambda c: safe_io.parse_json(c, "the action", finite=False), ast.literal_eval,
               lambda c: ast.literal_eval(re.sub(r"\b(true|false|null)\b", lambda m: _JSON_LITERALS[m.group(1)], c)))
    for load in loaders:
        try:
            return load(candidate)
        except (LocatedError, ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return None
