"""The actions a DSL document declares, normalised: what pipeline/envfolder/actions.py's
ActionSpace is built from (its readable text, tool schemas, sampling, candidates, membership).

They come from `transition.actions`, whose parameters may be plain names (`[dx, dy]`, the
paper's form) or typed (`{name, type, enum | range, description, optional}`). The document
should have passed `check_document`; malformed entries are skipped, not guessed at.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envforge.dsl_schema.semantics import action_params

ACTION_FORMAT = (
    'Send exactly one action per turn as a JSON object: {"action": "<name>", "params": {<parameter>: <value>, ...}}.'
)


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
