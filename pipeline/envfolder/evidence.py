"""The values an untyped action parameter takes, read from what the folder says about it.

The paper's DSL lets a parameter be a bare name (`params: [column]`). What values it takes is
then written only in prose: action_space.txt ("Column index (0-6)"), the instruction, the DSL's
own texts ("column in [0,1,2,3,4,5,6]"), or the levels (a `colors: [red, blue]` list). Each
reading here is a guess and says where it came from; the first source that yields one wins.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

WINDOW = 160  # characters after a mention of the parameter searched for its values
MAX_SPAN = 1000  # an integer range wider than this is not read as a domain
MAX_VALUES = 32  # more distinct values than this under a key are not read as a domain
_RANGE = re.compile(r"(-?\d+)\s*(?:-|–|\.\.|\bto\b|\bthrough\b)\s*(-?\d+)")
_LIST = re.compile(r"[\[{(]([^\[\]{}()\n]{1,300})[\]})]")
_ONE_OF = re.compile(
    r"\b(?:one of|either|values?|options?)\s*:?\s+((?:['\"]?[\w-]+['\"]?\s*(?:,|\||/|\bor\b)\s*)+['\"]?[\w-]+['\"]?)",
    re.IGNORECASE,
)
_EXAMPLE = re.compile(r"\b(?:e\.g\.|i\.e\.|for example|for instance|example|such as)", re.IGNORECASE)
_NEXT_KEY = re.compile(r"[,{]\s*[\"']\w+[\"']\s*:")
_QUOTED = re.compile(r"""(['"])([\w-]{1,40})\1""")
_VALUE_OF = re.compile(r"""\s*['"]?\s*[:=]\s*""")  # between a parameter's name and its value


@dataclass(frozen=True)
class Domain:
    values: tuple[Any, ...] | None = None
    range: tuple[int, int] | None = None
    source: str = ""


def from_texts(name: str, texts: Iterable[tuple[str, str]]) -> Domain | None:
    """The first domain found next to a mention of `name`, trying the texts in order."""
    mention = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])", re.IGNORECASE)
    for source, text in texts:
        for m in mention.finditer(text or ""):
            found = _read(text[m.end(): m.end() + WINDOW], name)
            if found is not None:
                values, span = found
                return Domain(values, span, source)
    return None


def from_levels(name: str, levels: Iterable[tuple[str, Any]], scalars: bool = False) -> Domain | None:
    """The plain values (strings, integers) a level stores under `name`: a list (or a mapping's
    keys) of at least two under `name` or its plural; with `scalars` (a level's actual state, not
    a template of placeholders), else every value under a key that names it (`name`,
    `root_cause_<name>`, or a key ending in the name's first word: `root_cause_time` for
    `time_index`), in the order met, at most MAX_VALUES of them."""
    for source, data in levels:
        found: dict = {}
        for key, value in _items_under(data):
            if key in (name, name + "s", name + "es") and isinstance(value, (list, dict)):
                plain = [v for v in value if _plain(v)]
                if len(set(plain)) >= 2 and len(plain) == len(value):
                    return Domain(tuple(dict.fromkeys(plain)), None, source)
            elif scalars and _plain(value) and _names(key, name):
                found.setdefault(value, None)
        if 0 < len(found) <= MAX_VALUES:
            return Domain(tuple(found), None, source)
    return None


def _items_under(data: Any) -> Iterable[tuple[str, Any]]:
    """(key, value) of every mapping in `data`, depth first, bounded."""
    stack, seen = [data], 0
    while stack and seen < 100_000:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str):
                    yield key, value
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(reversed(node))


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool) and len(str(value)) <= 60


def _names(key: str, name: str) -> bool:
    """Whether a level's key names the parameter: the same words, or ending in them, or ending in the
    parameter's first word."""
    k, n = _words(key), _words(name)
    return bool(k and n) and (k[-len(n):] == n or (len(n) > 1 and k[-1] == n[0]))


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", text)]


def _read(window: str, name: str) -> tuple[tuple | None, tuple | None] | None:
    """Values or an integer range in the text right after a mention: the nearest reading wins."""
    window = window.split("\n", 1)[0]  # this line, up to the next JSON key or any example
    window = _EXAMPLE.split(_NEXT_KEY.split(window, maxsplit=1)[0], maxsplit=1)[0]
    readings = []
    for m in _LIST.finditer(window):
        if m.start() and (window[m.start() - 1].isalnum() or window[m.start() - 1] == "_"):
            continue  # a call's arguments (`ConnectClues(clueA, clueB)`), not values
        items = _items(m.group(1))
        if m.group(0)[0] == "[" and _VALUE_OF.fullmatch(window[:m.start()]) and items:
            # `"position": [1, 2]`: the parameter's value is a list (an example of one), not a choice
            # among its items; a list of names (`[row, col]`) gives a list of zeros of that length.
            value = items if all(isinstance(v, int) for v in items) else [0] * len(items)
            readings.append((m.start(), (value,), None))
            continue
        span = _span(m.group(1)) if len(items) < 2 else None
        if len(items) >= 2:
            readings.append((m.start(), tuple(items), None))
        elif span:
            readings.append((m.start(), None, span))
    for m in _RANGE.finditer(window):
        span = _span(m.group(0))
        if span:
            readings.append((m.start(), None, span))
    for m in _ONE_OF.finditer(window):
        items = _items(m.group(1))
        if len(items) >= 2:
            readings.append((m.start(), tuple(items), None))
    quoted = [q.group(2) for q in _QUOTED.finditer(window)
              if q.group(2).lower() != name.lower() and not window[q.end():].lstrip().startswith(":")]
    if len(quoted) >= 2:
        readings.append((_QUOTED.search(window).start(), tuple(dict.fromkeys(quoted)), None))
    if not readings:
        return None
    _, values, span = min(readings, key=lambda r: r[0])
    return values, span


def _span(text: str) -> tuple[int, int] | None:
    m = _RANGE.fullmatch(text.strip())
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    return (lo, hi) if lo < hi and hi - lo <= MAX_SPAN else None


def _items(text: str) -> list:
    """`0,1,2` / `'north', 'south'` / `up | down` / `left or right`: plain items, numbers as ints."""
    # "-1, 0, or 1": the comma before "or" leaves an empty part, which is no item
    parts = [p for p in (p.strip().strip("'\"` ") for p in re.split(r",|\||/|\bor\b", text)) if p]
    if not all(re.fullmatch(r"-?\d+|[A-Za-z_][\w-]{0,39}", p) for p in parts):
        return []
    values = [int(p) if re.fullmatch(r"-?\d+", p) else p for p in parts]
    if any(isinstance(v, int) for v in values) and not all(isinstance(v, int) for v in values):
        return []
    return list(dict.fromkeys(values))
