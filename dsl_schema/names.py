"""What the names in a DSL document resolve to, and the checks of them: paths into
state_template, the reserved names the runtime provides, the views declared in observation.views;
observation.expose, skin placeholders and the paths a condition reads must name one of those.

Every function takes the loaded document, which may be of any shape, and never raises on odd input.
"""
from __future__ import annotations

import re
import string
from typing import Any, Iterator

from envforge.dsl_schema.conditions import ConditionSyntaxError, parse_condition, paths
from envforge.dsl_schema.problems import format_path, rules, show, type_name
from envforge.pipeline.located import Problem

# Names an observation may expose (and a condition or skin may use) without a state_template path.
RESERVED_NAMES = {
    "t": "the current step, 0 after reset (injected by the runtime)",
    "max_steps": "the episode's step limit: termination.max_steps, or the level's override",
    "remaining_steps": "max_steps - t",
    "last_action_result": "the feedback text of the previous action (e.g. why it was invalid)",
    "visible_tiles": "the part of the map the observation policy lets the agent see",
}

SKIN_TYPES = ("text", "ascii", "json", "image")
CONDITION_SYNTAX = ("a condition in the DSL syntax (dotted paths, literals, == != < <= > >= in, "
                    "+ - * / %, and/or/not, len(...), parentheses)")



def section(doc: dict, name: str) -> dict:
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


# ---- observation.expose ---------------------------------------------------------------------

def declared_views(doc: dict) -> set[str]:
    views = section(doc, "observation").get("views")
    return {k for k in views if isinstance(k, str)} if isinstance(views, dict) else set()


def _lookup(parts: list[str], template: Any) -> tuple[str, list[str], Any]:
    """Walk `parts` through the state template: ('ok'|'missing'|'scalar'|'unknown', walked, value)."""
    value: Any = template
    walked: list[str] = []
    for part in parts:
        if isinstance(value, dict):
            key = part if part in value else (int(part) if part.isdigit() and int(part) in value else None)
            if key is None:
                return "missing", walked, value
            value = value[key]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif value is None or isinstance(value, list):
            return "unknown", walked, value  # filled in by the generator; cannot be checked here
        else:
            return "scalar", walked, value
        walked.append(part)
    return "ok", walked, value


def _path_problem(source: str, where: str, text: str, template: Any, extra_names: set[str],
                  severity: str, what: str) -> Problem | None:
    """A problem if dotted `text` names nothing in state_template, the reserved names or extra names."""
    parts = text.split(".")
    if len(parts) == 1 and (text in RESERVED_NAMES or text in extra_names):
        return None
    status, walked, value = _lookup(parts, template)
    if status == "ok":
        return None
    expected = (
        f"{what} ({', '.join(RESERVED_NAMES)}" + (", " + ", ".join(sorted(extra_names)) if extra_names else "") + ")"
    )
    at = "state_template" + "".join("." + w for w in walked)
    if status == "missing":
        keys = [str(k) for k in value][:8] if isinstance(value, dict) else []
        return Problem(
            source,
            where,
            expected,
            f"{show(text)} ({parts[len(walked)]!r} is not under {at}; it has {', '.join(keys) or 'no keys'})",
            severity,
        )
    if status == "scalar":
        return Problem(
            source,
            where,
            expected,
            f"{show(text)} ({at} is {type_name(value)} {show(value)}, which has no fields)",
            severity,
        )
    return Problem(
        source,
        where,
        f"{what} that can be checked",
        f"{show(text)} ({at} is {show(value)} in the template, so the rest of the path cannot be verified)",
        "warning",
    )


@rules(("error", "observation.expose[i]", "every exposed path resolves in state_template, or is a reserved name or a "
                                         "view declared in observation.views"),
       ("warning", "observation.expose[i]", "a path that runs into an empty list or null in state_template (filled "
                                            "by the generator) cannot be verified"))
def check_expose(doc: dict, source: str) -> Iterator[Problem]:
    expose = section(doc, "observation").get("expose")
    if not isinstance(expose, list):
        return
    template = doc.get("state_template")
    views = declared_views(doc)
    for index, entry in enumerate(expose):
        if isinstance(entry, str) and entry:
            problem = _path_problem(
                source,
                format_path(["observation", "expose", index]),
                entry,
                template,
                views,
                "error",
                "a path into state_template, a reserved name or a view declared in observation.views",
            )
            if problem:
                yield problem


# ---- skins: placeholders derivable from exposed fields -----------------------------------------

def derivable_names(doc: dict) -> set[str]:
    """Placeholder names a skin may use: reserved names, views, and names built from exposed paths.

    An exposed path a.b.c yields every run of its segments joined by '_' (c, b_c, a_b_c, a, a_b, b);
    an exposed group yields the same for every field under it. A declared view v also yields
    v_display (the runtime's default skin shows a list-valued view as lines under that name).
    """
    views = declared_views(doc)
    names = set(RESERVED_NAMES) | views | {f"{v}_display" for v in views}
    expose = section(doc, "observation").get("expose")
    template = doc.get("state_template")
    for entry in expose if isinstance(expose, list) else []:
        if not isinstance(entry, str):
            continue
        parts = entry.split(".")
        status, _, value = _lookup(parts, template)
        for sub in [[]] + (list(_nested_keys(value)) if status == "ok" else []):
            full = parts + sub
            for i in range(len(full)):
                for j in range(i + 1, len(full) + 1):
                    names.add("_".join(full[i:j]))
    return names


def _nested_keys(value: Any, depth: int = 0) -> Iterator[list[str]]:
    if isinstance(value, dict) and depth < 4:
        for key, child in value.items():
            yield [str(key)]
            for rest in _nested_keys(child, depth + 1):
                yield [str(key)] + rest


def placeholders(template: str) -> list[str]:
    """Base names of the str.format fields in a template ({agent[pos]} and {agent.pos} give 'agent')."""
    out = []
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None:
            out.append(re.split(r"[.\[]", field, maxsplit=1)[0])
    return out


@rules(("warning", "skin.template, skins.<name>.template", "every placeholder is derivable from observation.expose, a "
                                                            "reserved name or a declared view"),
       ("warning", "skin.type, skins.<name>.type", "a skin type other than text, ascii, json, image"))
def check_skins(doc: dict, source: str) -> Iterator[Problem]:
    skins: list[tuple[list, Any]] = [(["skin"], doc.get("skin"))]
    named = doc.get("skins")
    if isinstance(named, dict):
        skins += [(["skins", name], skin) for name, skin in named.items()]
    available = None
    for base, skin in skins:
        if not isinstance(skin, dict):
            continue
        kind = skin.get("type")
        if isinstance(kind, str) and kind and kind not in SKIN_TYPES:
            yield Problem(
                source, format_path(base + ["type"]), "one of " + ", ".join(SKIN_TYPES), show(kind), "warning"
            )
        template = skin.get("template")
        if not isinstance(template, str):
            continue
        where = format_path(base + ["template"])
        try:
            fields = placeholders(template)
        except ValueError as exc:
            yield Problem(
                source, where, "a str.format template (write literal braces as {{ and }})", str(exc), "warning"
            )
            continue
        available = derivable_names(doc) if available is None else available
        reported = set()
        for field in fields:
            if field in reported:
                continue
            reported.add(field)
            if field == "" or field.isdigit():
                yield Problem(
                    source, where, "named placeholders like {t}", f"positional placeholder {{{field}}}", "warning"
                )
            elif field not in available:
                yield Problem(
                    source,
                    where,
                    "placeholders derivable from observation.expose, reserved names or observation.views",
                    f"{{{field}}}, which none of them provides",
                    "warning",
                )


# ---- conditions -----------------------------------------------------------------------------

@rules(("error", "termination.conditions[i], reward.conditions[i].if", "parses in the condition syntax"),
       ("warning", "termination.conditions[i], reward.conditions[i].if", "a path the condition reads is not in "
                                                                         "state_template and not a reserved name"))
def check_conditions(doc: dict, source: str) -> Iterator[Problem]:
    found: list[tuple[list, Any]] = []
    conditions = section(doc, "termination").get("conditions")
    if isinstance(conditions, list):
        found += [(["termination", "conditions", i], c) for i, c in enumerate(conditions)]
    rules = section(doc, "reward").get("conditions")
    if isinstance(rules, list):
        found += [(["reward", "conditions", i, "if"], r.get("if")) for i, r in enumerate(rules) if isinstance(r, dict)]
    template = doc.get("state_template")
    views = declared_views(doc)
    for where, text in found:
        if not isinstance(text, str) or not text.strip():
            continue  # the schema reports the wrong type or an empty string
        try:
            parsed = parse_condition(text)
        except ConditionSyntaxError as exc:
            yield Problem(source, format_path(where), CONDITION_SYNTAX, f"{show(text)} ({exc})")
            continue
        for path in paths(parsed):
            dotted = ".".join(str(p) for p in path.parts)
            problem = _path_problem(source, format_path(where), dotted, template, views, "warning",
                                    "paths into state_template or reserved names")
            if problem:
                yield problem
