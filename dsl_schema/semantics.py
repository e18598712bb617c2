"""The rules of a DSL document that JSON Schema cannot express.

Every function here takes the loaded document, which may be of any shape (the schema errors are
reported separately), so each one looks before it leaps and never raises on odd input.
"""
from __future__ import annotations

import keyword
import re
import string
from typing import Any, Callable, Iterator

from dsl_schema.conditions import ConditionSyntaxError, parse_condition, paths
from dsl_schema.problems import Problem, format_path, show, type_name

# Names an observation may expose (and a condition or skin may use) without a state_template path.
RESERVED_NAMES = {
    "t": "the current step, 0 after reset (injected by the runtime)",
    "max_steps": "the episode's step limit: termination.max_steps, or the level's override",
    "remaining_steps": "max_steps - t",
    "last_action_result": "the feedback text of the previous action (e.g. why it was invalid)",
    "visible_tiles": "the part of the map the observation policy lets the agent see",
}

TOP_LEVEL_KEYS = ("meta", "state_template", "observation", "reward", "transition", "skin", "skins",
                  "termination", "generator", "world_loading", "misc")
TAG_KEYS = ("reward", "observation", "semantics")
ACTION_KEYS = ("name", "description", "params")
PARAM_KEYS = ("name", "type", "enum", "range", "description", "optional")
SKIN_TYPES = ("text", "ascii", "json", "image")
REWARD_RULE_KEYS = ("events", "conditions")

# The rules below, as documented in docs/dsl_reference.md (generated from this list).
RULES = (
    ("error", "observation.expose[i]", "every exposed path resolves in state_template, or is a reserved name or a view declared in observation.views"),
    ("warning", "observation.expose[i]", "a path that runs into an empty list or null in state_template (filled by the generator) cannot be verified"),
    ("error", "reward.events[i].value_key", "names a value map (a mapping) defined under reward"),
    ("error", "reward.<map>.<outcome>", "entries of a value map named by an event are numbers"),
    ("warning", "reward.<key>", "a value map no event refers to, or a key under reward that is not a rule or a map"),
    ("warning", "reward.events[i].trigger", "a trigger used by two events"),
    ("error", "transition.actions[i].name", "action names are unique (and, by the schema, identifiers of at most 64 characters)"),
    ("warning", "transition.actions[i].name", "an action name that is a Python keyword"),
    ("warning", "transition.actions[i].<key>", "keys of an action other than name, description, params (e.g. a misspelt 'parameters')"),
    ("error", "transition.actions[i].params[j]", "parameter names are unique within an action"),
    ("error", "...params[j].range", "range is [low, high] with low <= high, and only for integer or number parameters"),
    ("error", "...params[j].enum[k]", "enum values have the parameter's type"),
    ("error", "termination.max_steps", "equals state_template.globals.max_steps when that is present"),
    ("error", "termination.conditions[i], reward.conditions[i].if", "parses in the condition syntax"),
    ("warning", "termination.conditions[i], reward.conditions[i].if", "a path the condition reads is not in state_template and not a reserved name"),
    ("warning", "skin.template, skins.<name>.template", "every placeholder is derivable from observation.expose, a reserved name or a declared view"),
    ("warning", "skin.type, skins.<name>.type", "a skin type other than text, ascii, json, image"),
    ("warning", "<top-level key>", "a top-level key that is not a DSL section; meta.tags keys other than reward, observation, semantics"),
    ("error", "<key>", "(YAML text) a key repeated in one mapping: YAML would silently keep only the last"),
)

CONDITION_SYNTAX = ("a condition in the DSL syntax (dotted paths, literals, == != < <= > >= in, "
                    "+ - * / %, and/or/not, len(...), parentheses)")


def semantic_problems(doc: dict, source: str) -> list[Problem]:
    problems: list[Problem] = []
    for check in (_unknown_keys, _expose, _reward, _actions, _max_steps, _skins, _conditions):
        try:
            problems.extend(check(doc, source))
        except Exception as exc:  # a checker bug must not hide the document's other problems
            problems.append(Problem(source, "(checker)", f"{check.__name__[1:]} check to finish",
                                    f"internal error {type(exc).__name__}: {exc}", "warning"))
    return problems


def _section(doc: dict, name: str) -> dict:
    value = doc.get(name)
    return value if isinstance(value, dict) else {}


def _unknown_keys(doc: dict, source: str) -> Iterator[Problem]:
    for key in doc:
        if key not in TOP_LEVEL_KEYS:
            yield Problem(source, format_path([key]), "one of the DSL sections (" + ", ".join(TOP_LEVEL_KEYS) + ")",
                          f"unknown key {show(key)} (ignored by envforge)", "warning")
    tags = _section(doc, "meta").get("tags")
    if isinstance(tags, dict):
        for key in tags:
            if key not in TAG_KEYS:
                yield Problem(source, format_path(["meta", "tags", key]), "a tag among " + ", ".join(TAG_KEYS),
                              f"unknown tag {show(key)}", "warning")


# ---- observation.expose ---------------------------------------------------------------------

def declared_views(doc: dict) -> set[str]:
    views = _section(doc, "observation").get("views")
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
    expected = f"{what} ({', '.join(RESERVED_NAMES)}" + (", " + ", ".join(sorted(extra_names)) if extra_names else "") + ")"
    at = "state_template" + "".join("." + w for w in walked)
    if status == "missing":
        keys = [str(k) for k in value][:8] if isinstance(value, dict) else []
        return Problem(source, where, expected,
                       f"{show(text)} ({parts[len(walked)]!r} is not under {at}; it has {', '.join(keys) or 'no keys'})", severity)
    if status == "scalar":
        return Problem(source, where, expected, f"{show(text)} ({at} is {type_name(value)} {show(value)}, which has no fields)", severity)
    return Problem(source, where, f"{what} that can be checked", f"{show(text)} ({at} is {show(value)} in the template, "
                   "so the rest of the path cannot be verified)", "warning")


def _expose(doc: dict, source: str) -> Iterator[Problem]:
    expose = _section(doc, "observation").get("expose")
    if not isinstance(expose, list):
        return
    template = doc.get("state_template")
    views = declared_views(doc)
    for index, entry in enumerate(expose):
        if isinstance(entry, str) and entry:
            problem = _path_problem(source, format_path(["observation", "expose", index]), entry, template, views,
                                    "error", "a path into state_template, a reserved name or a view declared in observation.views")
            if problem:
                yield problem


# ---- reward ---------------------------------------------------------------------------------

def _reward(doc: dict, source: str) -> Iterator[Problem]:
    reward = doc.get("reward")
    if not isinstance(reward, dict):
        return
    maps = [k for k, v in reward.items() if k not in REWARD_RULE_KEYS and isinstance(v, dict)]
    events = reward.get("events") if isinstance(reward.get("events"), list) else []
    referenced: set[str] = set()
    triggers: dict[str, int] = {}
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            continue
        trigger = event.get("trigger")
        if isinstance(trigger, str):
            if trigger in triggers:
                yield Problem(source, format_path(["reward", "events", index, "trigger"]),
                              f"a trigger not already used by reward.events[{triggers[trigger]}]", show(trigger), "warning")
            triggers.setdefault(trigger, index)
        key = event.get("value_key")
        if not isinstance(key, str) or not key:
            continue
        where = format_path(["reward", "events", index, "value_key"])
        if key in REWARD_RULE_KEYS or key not in reward:
            yield Problem(source, where, "the name of a value map defined under reward (" + (", ".join(map(str, maps)) or "none defined") + ")",
                          f"{show(key)}, which is not defined under reward")
        elif not isinstance(reward[key], dict):
            yield Problem(source, where, f"the name of a value map (a mapping of outcome to number) under reward",
                          f"{show(key)}, but reward.{key} is {type_name(reward[key])} {show(reward[key])}")
        else:
            referenced.add(key)
    for key in referenced:
        yield from _numeric_map(reward[key], ["reward", key], source)
    for key, value in reward.items():
        if key in REWARD_RULE_KEYS or key in referenced:
            continue
        if isinstance(value, dict):
            yield Problem(source, format_path(["reward", key]), "a value map named by some reward.events[*].value_key",
                          "a map no event refers to", "warning")
        else:
            yield Problem(source, format_path(["reward", key]), "events, conditions or a value map (mapping of outcome to number)",
                          f"{type_name(value)} {show(value)}", "warning")


def _numeric_map(value: dict, path: list, source: str, depth: int = 0) -> Iterator[Problem]:
    for name, entry in value.items():
        if isinstance(entry, dict) and depth < 1:
            yield from _numeric_map(entry, path + [name], source, depth + 1)
        elif not isinstance(entry, (int, float)) or isinstance(entry, bool):
            yield Problem(source, format_path(path + [name]), "a number (the reward for this outcome)", f"{type_name(entry)} {show(entry)}")


# ---- transition.actions -----------------------------------------------------------------------

def action_params(action: dict) -> list[tuple[list, str, dict]]:
    """(path suffix, name, spec) for every parameter of an action, whatever form it is written in."""
    params = action.get("params")
    out: list[tuple[list, str, dict]] = []
    if isinstance(params, list):
        for index, item in enumerate(params):
            if isinstance(item, str):
                out.append(([index], item, {}))
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                out.append(([index], item["name"], item))
    elif isinstance(params, dict):
        for name, item in params.items():
            if isinstance(name, str):
                spec = item if isinstance(item, dict) else ({"description": item} if isinstance(item, str) else {})
                out.append(([name], name, spec))
    return out


def _actions(doc: dict, source: str) -> Iterator[Problem]:
    actions = _section(doc, "transition").get("actions")
    if not isinstance(actions, list):
        return
    seen: dict[str, int] = {}
    for index, action in enumerate(actions):
        if not isinstance(action, dict):
            continue
        base = ["transition", "actions", index]
        for key in action:
            if key not in ACTION_KEYS:
                yield Problem(source, format_path(base + [key]), "only the keys " + ", ".join(ACTION_KEYS),
                              f"unknown key {show(key)} (ignored)", "warning")
        name = action.get("name")
        if isinstance(name, str):
            if name in seen:
                yield Problem(source, format_path(base + ["name"]),
                              f"a name not used by another action (transition.actions[{seen[name]}] is already {name!r})", show(name))
            seen.setdefault(name, index)
            if keyword.iskeyword(name):
                yield Problem(source, format_path(base + ["name"]), "a name that is not a Python keyword (generated code uses it)",
                              show(name), "warning")
        yield from _params(action, base, source)


def _params(action: dict, base: list, source: str) -> Iterator[Problem]:
    names: dict[str, str] = {}
    for suffix, name, spec in action_params(action):
        where = base + ["params"] + suffix
        if name in names:
            yield Problem(source, format_path(where), f"parameter names unique within the action ({name!r} is also {names[name]})", show(name))
        names.setdefault(name, format_path(where))
        for key in [k for k in spec if k not in PARAM_KEYS]:
            yield Problem(source, format_path(where + [key]), "only the keys " + ", ".join(PARAM_KEYS), f"unknown key {show(key)} (ignored)", "warning")
        kind = spec.get("type")
        bounds = spec.get("range")
        if isinstance(bounds, list) and len(bounds) == 2 and all(_is_number(b) for b in bounds):
            if bounds[0] > bounds[1]:
                yield Problem(source, format_path(where + ["range"]), "[low, high] with low <= high", show(bounds))
            if isinstance(kind, str) and kind not in ("integer", "number"):
                yield Problem(source, format_path(where + ["range"]), f"no range for a {kind} parameter (range needs type integer or number)", show(bounds))
        values = spec.get("enum")
        if isinstance(kind, str) and isinstance(values, list):
            for position, item in enumerate(values):
                if not _has_type(item, kind):
                    yield Problem(source, format_path(where + ["enum", position]), f"a value of the parameter's type ({kind})",
                                  f"{type_name(item)} {show(item)}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _has_type(value: Any, kind: str) -> bool:
    checks: dict[str, Callable[[Any], bool]] = {
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": _is_number,
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    return checks.get(kind, lambda v: True)(value)


# ---- termination.max_steps mirrors globals.max_steps ----------------------------------------

def _max_steps(doc: dict, source: str) -> Iterator[Problem]:
    globals_ = _section(doc, "state_template").get("globals")
    if not isinstance(globals_, dict) or "max_steps" not in globals_:
        return
    mirrored = globals_["max_steps"]
    declared = _section(doc, "termination").get("max_steps")
    if not _is_int(declared):
        return
    if not _is_int(mirrored):
        yield Problem(source, "state_template.globals.max_steps", f"an integer mirroring termination.max_steps ({declared})",
                      f"{type_name(mirrored)} {show(mirrored)}")
    elif mirrored != declared:
        yield Problem(source, "termination.max_steps", f"{mirrored} (the value of state_template.globals.max_steps, which it mirrors)",
                      show(declared))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---- skins: placeholders derivable from exposed fields -----------------------------------------

def derivable_names(doc: dict) -> set[str]:
    """Placeholder names a skin may use: reserved names, views, and names built from exposed paths.

    An exposed path a.b.c yields every run of its segments joined by '_' (c, b_c, a_b_c, a, a_b, b);
    an exposed group yields the same for every field under it.
    """
    names = set(RESERVED_NAMES) | declared_views(doc)
    expose = _section(doc, "observation").get("expose")
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


def _skins(doc: dict, source: str) -> Iterator[Problem]:
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
            yield Problem(source, format_path(base + ["type"]), "one of " + ", ".join(SKIN_TYPES), show(kind), "warning")
        template = skin.get("template")
        if not isinstance(template, str):
            continue
        where = format_path(base + ["template"])
        try:
            fields = placeholders(template)
        except ValueError as exc:
            yield Problem(source, where, "a str.format template (write literal braces as {{ and }})", str(exc), "warning")
            continue
        available = derivable_names(doc) if available is None else available
        reported = set()
        for field in fields:
            if field in reported:
                continue
            reported.add(field)
            if field == "" or field.isdigit():
                yield Problem(source, where, "named placeholders like {t}", f"positional placeholder {{{field}}}", "warning")
            elif field not in available:
                yield Problem(source, where, "placeholders derivable from observation.expose, reserved names or observation.views",
                              f"{{{field}}}, which none of them provides", "warning")


# ---- conditions -----------------------------------------------------------------------------

def _conditions(doc: dict, source: str) -> Iterator[Problem]:
    found: list[tuple[list, Any]] = []
    conditions = _section(doc, "termination").get("conditions")
    if isinstance(conditions, list):
        found += [(["termination", "conditions", i], c) for i, c in enumerate(conditions)]
    rules = _section(doc, "reward").get("conditions")
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
