"""What is shown of an action space and typed into it: the text an agent reads (action_space.txt,
else derived from the DSL), one native tool-call schema per action, `play`'s one line per action
with where each domain came from, and the parser of what a person types (JSON, `move north`,
`move direction=north`, `move(direction=north)`).

The space itself (its actions and their domains, sampling, membership, enumeration for search)
is ActionSpace (actions.py); this module only renders and reads text against it. A domain read
from evidence is shown as a guess, never as a constraint (no enum or range in a tool schema).
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from envforge.dsl_schema.actions import ACTION_FORMAT, Param
from envforge.pipeline import safe_io
from envforge.pipeline.envfolder.actions import DECLARED, NO_EVIDENCE, ActionSpace
from envforge.pipeline.located import LocatedError


@dataclass(frozen=True)
class ActionText:
    """The text side of `space`; `written`: action_space.txt as the folder has it ("" when none)."""

    space: ActionSpace
    written: str = ""

    # -- what an agent reads -------------------------------------------------------------
    def for_agent(self) -> str:
        """The agent-facing description: action_space.txt as written, else derived from the DSL."""
        return self.written.strip() or self.derived().strip()

    def derived(self) -> str:
        """The description derived from the DSL: each action's signature and parameters' domains,
        the action format and an example."""
        lines = ["Available actions:"]
        for action in self.space:
            signature = ", ".join(p.name + ("?" if p.optional else "") for p in action.params)
            lines.append(f"- {action.name}({signature})" + (f": {action.description}" if action.description else ""))
            for param in action.params:
                lines.append(f"    {param.name}: {_param_text(param)}")
        lines += ["", ACTION_FORMAT]
        if self.space:
            first = self.space[0]
            example = {
                "action": first.name,
                "params": {p.name: _example_value(p) for p in first.params if not p.optional},
            }
            lines.append(f"Example: {json.dumps(example)}")
        return "\n".join(lines) + "\n"

    def tools(self) -> list[dict[str, Any]]:
        """One native tool-call schema per action: {"name", "description", "parameters"}, whose
        `parameters` is a JSON Schema object (OpenAI's `function.parameters`, Anthropic's
        `input_schema`). Untyped parameters accept any JSON value."""
        tools = []
        for action in self.space:
            properties: dict[str, Any] = {}
            for param in action.params:
                prop: dict[str, Any] = {}
                if param.type:
                    prop["type"] = param.type
                if self.space.sources.get((action.name, param.name), DECLARED) == DECLARED:
                    if param.enum is not None:
                        prop["enum"] = list(param.enum)
                    if param.range is not None:
                        prop["minimum"], prop["maximum"] = param.range
                prop["description"] = (
                    param.description or f"The {param.name.replace('_', ' ')} parameter of {action.name}."
                )
                properties[param.name] = prop
            tools.append({
                "name": action.name,
                "description": action.description or f"Take the action {action.name}.",
                "parameters": {"type": "object", "properties": properties,
                               "required": [p.name for p in action.params if not p.optional],
                               "additionalProperties": False},
            })
        return tools

    def describe(self) -> str:
        """One line per action, the syntax `play` accepts, with where each domain came from."""
        lines = []
        for a in self.space:
            params = " ".join(f"{p.name}=<{_domain_text(p) or p.type or 'value'}>" for p in a.params)
            lines.append(f"  {a.name} {params}".rstrip() + (f"   # {a.description}" if a.description else ""))
        inferred = sorted({s for s in self.space.sources.values() if s not in (DECLARED, NO_EVIDENCE)})
        if inferred:
            lines.append(f"  (values of untyped parameters read from {', '.join(inferred)})")
        return "\n".join(lines)

    # -- typed text ----------------------------------------------------------------------
    def parse(self, text: str) -> dict:
        """What a person types: JSON, `move direction=north`, `move north` or `move(direction=north)`.
        Raises ValueError saying what was expected when the text is not an action."""
        text = text.strip()
        if text.startswith("{"):
            try:
                data = safe_io.parse_json(text, "the action")
            except LocatedError:
                data = None
            if not isinstance(data, dict) or not isinstance(data.get("action"), str):
                raise ValueError('expected {"action": NAME, "params": {...}}')
            data.setdefault("params", {})
            return data
        if "(" in text and text.endswith(")"):
            name, _, inner = text[:-1].partition("(")
            text = name.strip() + " " + inner.replace(",", " ")
        try:
            words = shlex.split(text)
        except ValueError as e:
            raise ValueError(f"expected words and NAME=VALUE pairs, found {e}") from None
        if not words:
            raise ValueError("expected an action name")
        name, rest = words[0], words[1:]
        declared = self.space.get(name)
        positional = [p.name for p in declared.params] if declared else []
        params: dict[str, Any] = {}
        for i, word in enumerate(rest):
            if "=" in word:
                key, _, value = word.partition("=")
            elif i < len(positional):
                key, value = positional[i], word
            else:
                raise ValueError(f"expected NAME=VALUE for extra parameter, found {word!r}")
            params[key.strip()] = _value(value.strip())
        return {"action": name, "params": params}


def _domain_text(p: Param) -> str:
    if p.enum is not None:
        return "|".join(map(str, p.enum))
    if p.range is not None:
        return f"{p.range[0]}..{p.range[1]}"
    return ""


def _param_text(param: Param) -> str:
    parts = [param.type or "any value"]
    if param.enum is not None:
        parts.append("one of " + ", ".join(json.dumps(v) for v in param.enum))
    if param.range is not None:
        parts.append(f"from {param.range[0]} to {param.range[1]} inclusive")
    if param.optional:
        parts.append("optional")
    text = ", ".join(parts)
    return f"{text}. {param.description}" if param.description else text


def _example_value(param: Param) -> Any:
    if param.enum is not None:
        return param.enum[0]
    if param.range is not None:
        return param.range[0]
    return {"integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}.get(
        param.type or "", f"<{param.name}>"
    )


def _value(text: str) -> Any:
    try:
        return safe_io.parse_json(text, "a parameter")
    except LocatedError:
        return text
