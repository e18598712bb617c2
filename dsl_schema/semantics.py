"""The rules of a DSL document that JSON Schema cannot express: the structural checks (unknown keys, reward maps,
actions and their parameters, max_steps), and the composition with the checks of what names
resolve to (names.py: observation.expose, skin placeholders, condition paths). Each check declares
the rules it enforces (`@rules`); RULES, which docs/dsl_reference.md lists, is made of them.

Every function here takes the loaded document, which may be of any shape (the schema errors are
reported separately), so each one looks before it leaps and never raises on odd input.
"""
from __future__ import annotations

import keyword
from typing import Any, Callable, Iterator

from envforge.dsl_schema.names import check_conditions, check_expose, check_skins, section
from envforge.dsl_schema.problems import format_path, rules, show, type_name
from envforge.pipeline.located import Problem

__all__ = ["RULES", "action_params", "semantic_problems"]

TOP_LEVEL_KEYS = ("meta", "state_template", "observation", "reward", "transition", "skin", "skins",
                  "termination", "generator", "world_loading", "misc")
TAG_KEYS = ("reward", "observation", "semantics")
ACTION_KEYS = ("name", "description", "params")
PARAM_KEYS = ("name", "type", "enum", "range", "description", "optional")
REWARD_RULE_KEYS = ("events", "conditions")

def semantic_problems(doc: dict, source: str) -> list[Problem]:
    problems: list[Problem] = []
    for name, check in CHECKS.items():
        try:
            problems.extend(check(doc, source))
        except Exception as exc:  # a checker bug must not hide the document's other problems
            problems.append(Problem(source, "(checker)", f"{name} check to finish",
                                    f"internal error {type(exc).__name__}: {exc}", "warning"))
    return problems


@rules(("warning", "<top-level key>", "a top-level key that is not a DSL section; meta.tags keys other than reward, "
                                      "observation, semantics"))
def _unknown_keys(doc: dict, source: str) -> Iterator[Problem]:
    for key in doc:
        if key not in TOP_LEVEL_KEYS:
            yield Problem(source, format_path([key]), "one of the DSL sections (" + ", ".join(TOP_LEVEL_KEYS) + ")",
                          f"unknown key {show(key)} (ignored by envforge)", "warning")
    tags = section(doc, "meta").get("tags")
    if isinstance(tags, dict):
        for key in tags:
            if key not in TAG_KEYS:
                yield Problem(source, format_path(["meta", "tags", key]), "a tag among " + ", ".join(TAG_KEYS),
                              f"unknown tag {show(key)}", "warning")


# ---- reward ---------------------------------------------------------------------------------

@rules(("error", "reward.events[i].value_key", "names a value map (a mapping) defined under reward"),
       ("error", "reward.<map>.<outcome>", "entries of a value map named by an event are numbers"),
       ("warning", "reward.<key>", "a value map no event refers to, or a key under reward that is not a rule or a map"),
       ("warning", "reward.events[i].trigger", "a trigger used by two events"))
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
                yield Problem(
                    source,
                    format_path(["reward", "events", index, "trigger"]),
                    f"a trigger not already used by reward.events[{triggers[trigger]}]",
                    show(trigger),
                    "warning",
                )
            triggers.setdefault(trigger, index)
        key = event.get("value_key")
        if not isinstance(key, str) or not key:
            continue
        where = format_path(["reward", "events", index, "value_key"])
        if key in REWARD_RULE_KEYS or key not in reward:
            yield Problem(
                source,
                where,
                "the name of a value map defined under reward (" + (", ".join(map(str, maps)) or "none defined") + ")",
                f"{show(key)}, which is not defined under reward",
            )
        elif not isinstance(reward[key], dict):
            yield Problem(source, where, "the name of a value map (a mapping of outcome to number) under reward",
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
            yield Problem(
                source,
                format_path(["reward", key]),
                "events, conditions or a value map (mapping of outcome to number)",
                f"{type_name(value)} {show(value)}",
                "warning",
            )


def _numeric_map(value: dict, path: list, source: str, depth: int = 0) -> Iterator[Problem]:
    for name, entry in value.items():
        if isinstance(entry, dict) and depth < 1:
            yield from _numeric_map(entry, path + [name], source, depth + 1)
        elif not isinstance(entry, (int, float)) or isinstance(entry, bool):
            yield Problem(
                source,
                format_path(path + [name]),
                "a number (the reward for this outcome)",
                f"{type_name(entry)} {show(entry)}",
            )


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


@rules(("error", "transition.actions[i].params[j]", "parameter names are unique within an action"),
       ("error", "...params[j].range", "range is [low, high] with low <= high, and only for integer or number "
                                       "parameters"),
       ("error", "...params[j].enum[k]", "enum values have the parameter's type"))
def _params(action: dict, base: list, source: str) -> Iterator[Problem]:
    names: dict[str, str] = {}
    for suffix, name, spec in action_params(action):
        where = base + ["params"] + suffix
        if name in names:
            yield Problem(
                source,
                format_path(where),
                f"parameter names unique within the action ({name!r} is also {names[name]})",
                show(name),
            )
        names.setdefault(name, format_path(where))
        for key in [k for k in spec if k not in PARAM_KEYS]:
            yield Problem(
                source,
                format_path(where + [key]),
                "only the keys " + ", ".join(PARAM_KEYS),
                f"unknown key {show(key)} (ignored)",
                "warning",
            )
        kind = spec.get("type")
        bounds = spec.get("range")
        if isinstance(bounds, list) and len(bounds) == 2 and all(_is_number(b) for b in bounds):
            if bounds[0] > bounds[1]:
                yield Problem(source, format_path(where + ["range"]), "[low, high] with low <= high", show(bounds))
            if isinstance(kind, str) and kind not in ("integer", "number"):
                yield Problem(
                    source,
                    format_path(where + ["range"]),
                    f"no range for a {kind} parameter (range needs type integer or number)",
                    show(bounds),
                )
        values = spec.get("enum")
        if isinstance(kind, str) and isinstance(values, list):
            for position, item in enumerate(values):
                if not _has_type(item, kind):
                    yield Problem(
                        source,
                        format_path(where + ["enum", position]),
                        f"a value of the parameter's type ({kind})",
                        f"{type_name(item)} {show(item)}",
                    )


@rules(("error", "transition.actions[i].name", "action names are unique (and, by the schema, identifiers of at "
                                              "most 64 characters)"),
       ("warning", "transition.actions[i].name", "an action name that is a Python keyword"),
       ("warning", "transition.actions[i].<key>", "keys of an action other than name, description, params (e.g. a "
                                                  "misspelt 'parameters')"),
       *_params.rules)
def _actions(doc: dict, source: str) -> Iterator[Problem]:
    actions = section(doc, "transition").get("actions")
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
                yield Problem(
                    source,
                    format_path(base + ["name"]),
                    f"a name not used by another action (transition.actions[{seen[name]}] is already {name!r})",
                    show(name),
                )
            seen.setdefault(name, index)
            if keyword.iskeyword(name):
                yield Problem(
                    source,
                    format_path(base + ["name"]),
                    "a name that is not a Python keyword (generated code uses it)",
                    show(name),
                    "warning",
                )
        yield from _params(action, base, source)


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

@rules(("error", "termination.max_steps", "equals state_template.globals.max_steps when that is present"))
def _max_steps(doc: dict, source: str) -> Iterator[Problem]:
    globals_ = section(doc, "state_template").get("globals")
    if not isinstance(globals_, dict) or "max_steps" not in globals_:
        return
    mirrored = globals_["max_steps"]
    declared = section(doc, "termination").get("max_steps")
    if not _is_int(declared):
        return
    if not _is_int(mirrored):
        yield Problem(
            source,
            "state_template.globals.max_steps",
            f"an integer mirroring termination.max_steps ({declared})",
            f"{type_name(mirrored)} {show(mirrored)}",
        )
    elif mirrored != declared:
        yield Problem(
            source,
            "termination.max_steps",
            f"{mirrored} (the value of state_template.globals.max_steps, which it mirrors)",
            show(declared),
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Run in this order; each declares the rules it enforces (in docs/dsl_reference.md, with the YAML
# text's own rule: dsl_schema.check.RULES).
CHECKS: dict[str, Callable[[dict, str], Iterator[Problem]]] = {
    "unknown_keys": _unknown_keys, "expose": check_expose, "reward": _reward, "actions": _actions,
    "max_steps": _max_steps, "skins": check_skins, "conditions": check_conditions}
RULES = tuple(rule for check in CHECKS.values() for rule in check.rules)  # type: ignore[attr-defined]
