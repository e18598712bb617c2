"""Actions as the parent sees them: the declared action space, sampling, and parsing typed text.

The action space comes from config.yaml's `transition.actions` (read as data, never run).
"""
from __future__ import annotations

import json
import random
import shlex
from typing import Any

from dsl_schema.actions import Action, Param, actions


def declared_actions(config: dict) -> list[Action]:
    return actions(config or {})


def sample_params(action: Action, rng: random.Random) -> dict[str, Any]:
    return {p.name: sample_value(p, rng) for p in action.params if not p.optional or rng.random() < 0.5}


def sample_value(param: Param, rng: random.Random) -> Any:
    if param.enum:
        return rng.choice(list(param.enum))
    if param.range:
        lo, hi = param.range
        if param.type == "number":
            return rng.uniform(lo, hi)
        return rng.randint(int(lo), int(hi))
    return {"number": rng.uniform(0, 5), "boolean": rng.random() < 0.5, "string": "a"}.get(
        param.type or "", rng.randint(0, 5))


def random_action(space: list[Action], rng: random.Random, invalid_rate: float = 0.0) -> dict:
    """A random action; with probability `invalid_rate`, a malformed one (unknown name or
    out-of-range parameter), because environments must survive what agents really send."""
    if not space or rng.random() < invalid_rate:
        return rng.choice([
            {"action": "__no_such_action__", "params": {}},
            {"action": space[0].name if space else "noop", "params": {"__bogus__": -999999}},
            {"action": rng.choice(space).name if space else "noop", "params": {}},
        ])
    action = rng.choice(space)
    return {"action": action.name, "params": sample_params(action, rng)}


def parse_action(text: str, space: list[Action]) -> dict:
    """Parse what a person types: JSON, `move direction=north`, or `move north`.

    Raises ValueError with what was expected when the text is not an action.
    """
    text = text.strip()
    if text.startswith("{"):
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("action"), str):
            raise ValueError('expected {"action": NAME, "params": {...}}')
        data.setdefault("params", {})
        return data
    words = shlex.split(text)
    if not words:
        raise ValueError("expected an action name")
    name, rest = words[0], words[1:]
    declared = next((a for a in space if a.name == name), None)
    params: dict[str, Any] = {}
    positional = [p.name for p in declared.params] if declared else []
    for i, word in enumerate(rest):
        if "=" in word:
            key, _, value = word.partition("=")
        elif i < len(positional):
            key, value = positional[i], word
        else:
            raise ValueError(f"expected NAME=VALUE for extra parameter, found {word!r}")
        params[key] = _value(value)
    return {"action": name, "params": params}


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def describe(space: list[Action]) -> str:
    """One line per action, the syntax `play` accepts."""
    lines = []
    for a in space:
        params = " ".join(f"{p.name}=<{'|'.join(map(str, p.enum)) if p.enum else (p.type or 'value')}>" for p in a.params)
        lines.append(f"  {a.name} {params}".rstrip() + (f"   # {a.description}" if a.description else ""))
    return "\n".join(lines)
