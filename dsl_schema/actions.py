"""The action space of a DSL document, for agents: readable text and native tool-call schemas.

Both are derived from `transition.actions`, whose parameters may be plain names (`[dx, dy]`, the
paper's form) or typed (`{name, type, enum | range, description, optional}`). The document
should have passed `check_document`; malformed entries are skipped, not guessed at.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dsl_schema.semantics import action_params

ACTION_FORMAT = 'Send exactly one action per turn as a JSON object: {"action": "<name>", "params": {<parameter>: <value>, ...}}.'


@dataclass(frozen=True)
class Param:
    name: str
    type: str | None = None  # a JSON Schema type name; None means any value
    enum: tuple[Any, ...] | None = None
    range: tuple[float, float] | None = None
    description: str = ""
    optional: bool = False


@dataclass(frozen=True)
class Action:
    name: str
    description: str
    params: tuple[Param, ...]


def actions(doc: Any) -> list[Action]:
    """The actions of a DSL document with their parameters normalised to `Param`."""
    transition = doc.get("transition") if isinstance(doc, dict) else None
    raw = transition.get("actions") if isinstance(transition, dict) else None
    out = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        params = tuple(_param(name, spec) for _, name, spec in action_params(entry))
        description = entry.get("description") if isinstance(entry.get("description"), str) else ""
        out.append(Action(entry["name"], description.strip(), params))
    return out


def _param(name: str, spec: dict) -> Param:
    kind = spec.get("type") if isinstance(spec.get("type"), str) else None
    enum = tuple(spec["enum"]) if isinstance(spec.get("enum"), list) and spec["enum"] else None
    bounds = spec.get("range")
    span = (bounds[0], bounds[1]) if isinstance(bounds, list) and len(bounds) == 2 else None
    description = spec.get("description") if isinstance(spec.get("description"), str) else ""
    return Param(name, kind, enum, span, description.strip(), spec.get("optional") is True)


def action_space_text(doc: Any) -> str:
    """Agent-facing description of the action space (the content of action_space.txt)."""
    lines = ["Available actions:"]
    for action in actions(doc):
        signature = ", ".join(p.name + ("?" if p.optional else "") for p in action.params)
        lines.append(f"- {action.name}({signature})" + (f": {action.description}" if action.description else ""))
        for param in action.params:
            lines.append(f"    {param.name}: {_param_text(param)}")
    lines.append("")
    lines.append(ACTION_FORMAT)
    listed = actions(doc)
    if listed:
        example = {"action": listed[0].name, "params": {p.name: _example_value(p) for p in listed[0].params if not p.optional}}
        lines.append(f"Example: {json.dumps(example)}")
    return "\n".join(lines) + "\n"


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
    return {"integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}.get(param.type or "", f"<{param.name}>")


def tool_schemas(doc: Any) -> list[dict[str, Any]]:
    """One native tool-call schema per action: {"name", "description", "parameters"}.

    `parameters` is a JSON Schema object, usable as OpenAI's `function.parameters` and as
    Anthropic's `input_schema`. Untyped parameters accept any JSON value.
    """
    tools = []
    for action in actions(doc):
        properties: dict[str, Any] = {}
        for param in action.params:
            prop: dict[str, Any] = {}
            if param.type:
                prop["type"] = param.type
            if param.enum is not None:
                prop["enum"] = list(param.enum)
            if param.range is not None:
                prop["minimum"], prop["maximum"] = param.range
            prop["description"] = param.description or f"The {param.name.replace('_', ' ')} parameter of {action.name}."
            properties[param.name] = prop
        tools.append({
            "name": action.name,
            "description": action.description or f"Take the action {action.name}.",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": [p.name for p in action.params if not p.optional],
                "additionalProperties": False,
            },
        })
    return tools
