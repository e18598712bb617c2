"""The values a search tries for the parameters of an action on one level, drawn from the level.

A fixed grid (a range's ends and middle, one sampled value) misses what a level asks for: a gear
ratio of 37.5 the level stores, an amount of 5,000 it states. So a parameter whose domain is not
enumerated whole (no enum, no integer range of at most SMALL_RANGE values) takes, after its
domain's own values (ActionSpace.candidates):
  * its range's extremes;
  * the numbers the level's state holds (a numeric parameter: typed so, with a range, or untyped
    and named so, NUMERIC_WORDS; inside a declared range, integers only for an integer
    parameter), in the order met;
  * else, for one with no known domain, the ids and names it holds: its short string values and
    the keys of its mappings two levels down;
  * powers of ten up to the range's top, or without one up to ten times the largest number the
    state holds (an unbounded amount), and their negatives when the domain goes below zero (a
    numeric parameter);
at most MAX_VALUES. After a first pass, `refine` adds for each such numeric parameter the
neighbours of the values the best witness used (halfway to the next value tried on each side, and
one unit either way: 1 for an integer, a tenth of it for a real), or, when the witness used none
(nothing scored with one), the midpoints between the values tried: the grid bisected.
Deterministic: the same level and witness give the same values, in the same order.
"""
from __future__ import annotations

import math
import re
from typing import Any

from envforge.dsl_schema.actions import Param
from envforge.pipeline.envfolder.actions import NO_EVIDENCE, SMALL_RANGE, ActionSpace, _candidate_values

MAX_VALUES = 24  # values one parameter takes on a level before refinement
MAX_REFINED = 48  # ... and after it
MAX_READ = 64  # numbers, and names, read from one state
MAX_NODES = 100_000  # containers and scalars walked in one state
MAX_NAME = 40  # a string longer than this is text, not a name
BIG = 1e12  # a number past this is no parameter value (a seed, a timestamp)
TOP_SCALE = 10 ** 9
# An untyped parameter whose name has one of these words takes numbers; any other, names. One kind,
# never both: an environment reading a count may fail on a name it was never meant to get.
NUMERIC_WORDS = frozenset({"amount", "quantity", "qty", "count", "number", "num", "value", "ratio", "steps", "step",
                           "size", "volume", "length", "price", "rate", "speed", "angle", "power", "level", "weight",
                           "distance", "duration", "delay", "units", "dose", "bet", "bid", "offer", "sum", "total"})


def level_values(space: ActionSpace, state: Any) -> dict[tuple[str, str], list]:
    """(action, parameter) -> the values a search on this level tries, for every parameter of
    `space` (ActionSpace.for_state of the level): its domain's own values, and for one not
    enumerated whole what the level adds (the module docstring)."""
    numbers, names = _scalars(state)
    out = {}
    for action in space.actions:
        for p in action.params:
            own = _candidate_values(p)
            if _whole(p) or p.type in ("boolean", "array", "object"):
                out[action.name, p.name] = own
                continue
            unknown = space.sources.get((action.name, p.name)) == NO_EVIDENCE
            head = _distinct(own + _extremes(p))
            tail = _scales(p, numbers) if _numeric(p) else []
            middle = _numbers(p, numbers) if _numeric(p) else names if unknown else []
            room = max(0, MAX_VALUES - len(head) - len(tail))
            out[action.name, p.name] = _distinct(head + middle[:room] + tail)[:max(MAX_VALUES, len(own))]
    return out


def refinable(space: ActionSpace) -> list[tuple[str, str]]:
    """The (action, parameter) pairs `refine` refines: numeric (`_numeric`), not enumerated whole."""
    return [(a.name, p.name) for a in space.actions for p in a.params if not _whole(p) and _numeric(p)]


def refine(space: ActionSpace, values: dict[tuple[str, str], list], witness: list[dict]) -> dict[tuple[str, str], list]:
    """`values` with the neighbours of what `witness` used added to every refinable parameter (the
    module docstring); the grid bisected for one the witness did not use."""
    out = dict(values)
    for key in refinable(space):
        tried = values.get(key) or []
        grid = sorted({v for v in tried if _number(v)})
        if not grid:
            continue
        p = next(q for a in space.actions if a.name == key[0] for q in a.params if q.name == key[1])
        used = _distinct([step.get("params", {}).get(key[1]) for step in witness
                          if step.get("action") == key[0] and _number(step.get("params", {}).get(key[1]))])
        new = []
        for v in used:
            lower = [g for g in grid if g < v]
            upper = [g for g in grid if g > v]
            unit = 1 if p.type == "integer" or (isinstance(v, int) and p.type is None) else max(abs(v) / 10, 0.1)
            new += ([(lower[-1] + v) / 2] if lower else []) + ([(v + upper[0]) / 2] if upper else []) + [v - unit,
                                                                                                      v + unit]
        if not used:
            new = [(a + b) / 2 for a, b in zip(grid, grid[1:])]
        new = [_typed(p, v) for v in new]
        out[key] = _distinct(tried + [v for v in new if v is not None and _inside(p, v)])[:MAX_REFINED]
    return out


def report(values: dict[tuple[str, str], list], first: dict[tuple[str, str], list] | None = None) -> dict:
    """The value sets as the search figures record them: {"action.parameter": {"values": [...]}},
    with "refined": the values refinement added to `first`, the sets of the first pass."""
    out = {}
    for (action, param), tried in values.items():
        entry = {"values": list(tried)}
        added = [v for v in tried if first is not None and v not in (first.get((action, param)) or [])]
        if added:
            entry["refined"] = added
        out[f"{action}.{param}"] = entry
    return out


def _numeric(p: Param) -> bool:
    """Whether a parameter takes numbers: typed so, given a range, or untyped and named so (NUMERIC_WORDS)."""
    return p.type in ("integer", "number") or p.range is not None or (
        p.type is None and bool(set(_words(p.name)) & NUMERIC_WORDS))


def _words(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)]


def _whole(p: Param) -> bool:
    """Whether the candidate values are the parameter's whole domain as known: an enum, or an
    integer range of at most SMALL_RANGE values."""
    if p.enum:
        return True
    if p.range is None:
        return False
    lo, hi = p.range
    return p.type != "number" and type(lo) is int and type(hi) is int and hi - lo <= SMALL_RANGE


def _extremes(p: Param) -> list:
    return [p.range[0], p.range[1]] if p.range is not None else []


def _numbers(p: Param, numbers: list) -> list:
    return [t for t in (_typed(p, v) for v in numbers) if t is not None and _inside(p, t)]


def _scales(p: Param, numbers: list) -> list:
    """Powers of ten up to the top of the range, or up to ten times the largest number the state
    holds (at least 10), and their negatives when the domain reaches below zero."""
    if p.range is not None:
        top, negative = max(abs(p.range[0]), abs(p.range[1])), p.range[0] < 0
    else:
        top = 10 * max([abs(v) for v in numbers] + [1])
        negative = any(v < 0 for v in numbers)
    out, power = [], 1
    while power <= min(top, TOP_SCALE):
        out += [power] + ([-power] if negative else [])
        power *= 10
    return [t for t in (_typed(p, v) for v in out) if t is not None and _inside(p, t)]


def _typed(p: Param, v):
    """`v` as a value of the parameter's type (an integral real becomes an int for an integer
    parameter; a fraction is none), or None."""
    if not _number(v):
        return None
    if p.type == "integer" or (p.type is None and isinstance(v, float) and v.is_integer()):
        return int(v) if float(v).is_integer() else None
    return round(v, 9) if isinstance(v, float) else v


def _inside(p: Param, v) -> bool:
    return p.range is None or p.range[0] <= v <= p.range[1]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= BIG


def _distinct(values: list) -> list:
    """Each value once (1 and 1.0 are one), first place kept; unhashable ones left out."""
    seen, out = set(), []
    for v in values:
        try:
            key = (float(v) if _number(v) else (type(v).__name__, v))
            if key in seen:
                continue
        except TypeError:
            continue
        seen.add(key)
        out.append(v)
    return out


def _scalars(state: Any) -> tuple[list, list]:
    """The numbers and the names (short strings, keys of inner mappings) a state holds, each at
    most MAX_READ, in the order a depth-first walk meets them; bounded by MAX_NODES."""
    numbers, names, stack, walked = [], [], [(state, 0)], 0
    while stack and walked < MAX_NODES:
        node, depth = stack.pop()
        walked += 1
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in reversed(list(node.values())))
            if depth >= 2:  # ids (`inventory: {crystals: 3}`), not the state's own fields
                names += [k for k in node if isinstance(k, str) and 0 < len(k) <= MAX_NAME]
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in reversed(node))
        elif _number(node):
            numbers.append(node)
        elif isinstance(node, str) and 0 < len(node) <= MAX_NAME and "\n" not in node:
            names.append(node)
    return _distinct(numbers)[:MAX_READ], _distinct(names)[:MAX_READ]
