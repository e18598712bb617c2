"""Check a DSL document: JSON Schema first, then the semantic rules the schema cannot express.

The public calls never raise on bad input: an unreadable file, malformed YAML or a document of
the wrong shape all come back as located Problems, so the generation pipeline can send them to
the model as they are.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml

from envforge.dsl_schema.problems import format_path, rules, show, type_name, typed
from envforge.dsl_schema.semantics import RULES as SEMANTIC_RULES
from envforge.dsl_schema.semantics import semantic_problems
from envforge.pipeline.located import LocatedError, Problem
from envforge.pipeline.safe_io import parse_yaml_node  # the one bounded YAML parser

SCHEMA_PATH = Path(__file__).with_name("envforge_dsl.schema.json")
MAX_FILE_BYTES = 1_000_000


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema())


def check_file(path: str | Path) -> list[Problem]:
    """Problems of the DSL document in the YAML file at `path`, errors first."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [Problem(source, "(file)", "an existing DSL file", "no such file")]
    except OSError as exc:
        return [Problem(source, "(file)", "a readable DSL file", exc.strerror or type(exc).__name__)]
    if len(data) > MAX_FILE_BYTES:
        return [Problem(source, "(file)", f"at most {MAX_FILE_BYTES} bytes", f"{len(data)} bytes")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [Problem(source, "(file)", "UTF-8 text", f"byte 0x{data[exc.start]:02x} at offset {exc.start}")]
    return check_text(text, source)


def check_text(text: str, source: str = "<text>") -> list[Problem]:
    """Problems of a DSL document given as YAML text; fields carry their line numbers."""
    try:
        doc, node = parse_yaml_node(text, source)
    except LocatedError as exc:
        p = exc.problem
        where = f"line {p.line}" if p.line else "(document)"
        return [Problem(source, where, p.expected, p.found, line=p.line)]
    lines: dict[tuple, int] = {}
    duplicates: list[Problem] = []
    if node is not None:
        try:
            _index_lines(node, (), lines, duplicates, source)
        except RecursionError:
            pass
    problems = duplicates + check_document(doc, source)
    return _sort([_with_line(p, lines) for p in problems])


def check_document(doc: Any, source: str = "<document>") -> list[Problem]:
    """Problems of an already-loaded DSL document (a mapping); errors first, then warnings."""
    if doc is None:
        return [
            Problem(
                source, "(document)", "a mapping with the DSL sections (meta, state_template, ...)", "an empty document"
            )
        ]
    if not isinstance(doc, dict):
        return [
            Problem(
                source,
                "(document)",
                "a mapping with the DSL sections (meta, state_template, ...)",
                f"a {type_name(doc)}",
            )
        ]
    try:
        problems = _schema_problems(doc, source)
    except RecursionError:
        return [Problem(source, "(document)", "a document nested at most a few hundred levels deep", "deeper nesting")]
    problems += semantic_problems(doc, source)
    return _sort(_dedupe(problems))


def is_valid(problems: Iterable[Problem]) -> bool:
    """True if no problem is an error (warnings allowed)."""
    return not any(p.severity == "error" for p in problems)


def feedback_for_model(problems: Iterable[Problem]) -> str:
    """The problems as plain lines for the repair prompt: errors, then warnings."""
    lines = []
    for p in _sort(list(problems)):
        lines.append(f"{p.severity}: {p}")
    return "\n".join(lines)


def _schema_problems(doc: dict, source: str) -> list[Problem]:
    problems: list[Problem] = []
    for error in _validator().iter_errors(doc):
        problems.extend(_translate(error, source))
    return problems


def _translate(error: jsonschema.ValidationError, source: str) -> list[Problem]:
    """One jsonschema error as Problems that say where, what was expected and what was found."""
    path = list(error.absolute_path)
    keyword = error.validator
    value = error.validator_value
    instance = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}

    if keyword == "required":
        found_keys = set(instance) if isinstance(instance, dict) else set()
        out = []
        for name in value:
            if name not in found_keys:
                sub = schema.get("properties", {}).get(name, {})
                out.append(Problem(source, format_path(path + [name]), f"{_describe(sub)} (required)", "nothing"))
        return out
    if keyword in ("anyOf", "oneOf"):
        return _translate_choice(error, source)
    if keyword == "allOf":
        return [p for sub in error.context for p in _translate(sub, source)]
    where = format_path(path)
    if keyword == "type":
        return [Problem(source, where, _describe(schema), typed(instance))]
    if keyword == "enum":
        return [Problem(source, where, "one of " + ", ".join(_json(v) for v in value), show(instance))]
    if keyword == "const":
        return [Problem(source, where, _json(value), show(instance))]
    if keyword == "pattern":
        expected = schema.get("description") or f"a string matching {value}"
        if len(expected) > 160:
            expected = f"a string matching {value}"
        return [Problem(source, where, _lower_first(expected.rstrip(".")), show(instance))]
    if keyword == "minLength":
        return [
            Problem(
                source, where, "a non-empty string" if value == 1 else f"at least {value} characters", show(instance)
            )
        ]
    if keyword in ("minItems", "maxItems"):
        word = "at least" if keyword == "minItems" else "at most"
        return [Problem(source, where, f"{word} {value} item{'s' if value != 1 else ''}", f"{len(instance)}")]
    if keyword == "minProperties":
        return [Problem(source, where, f"at least {value} key{'s' if value != 1 else ''}", "an empty mapping")]
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        symbol = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[keyword]
        return [Problem(source, where, f"a number {symbol} {value}", show(instance))]
    if keyword == "propertyNames":
        return [
            Problem(
                source,
                where,
                "keys that are identifiers (letters, digits, _; not starting with a digit)",
                show(instance),
            )
        ]
    if keyword == "additionalProperties":
        return [Problem(source, where, "only the documented keys", show(instance))]
    return [Problem(source, where, f"a value satisfying {keyword} {_json(value)}", show(instance))]


def _translate_choice(error: jsonschema.ValidationError, source: str) -> list[Problem]:
    """anyOf/oneOf: report the branch that fits the value's type, or list the accepted forms."""
    path = list(error.absolute_path)
    context = list(error.context or [])
    # Branches rejected only for the value's type say nothing useful on their own.
    relevant = [e for e in context if not (e.validator == "type" and list(e.absolute_path) == path)]
    if relevant and all(e.validator == "required" and list(e.absolute_path) == path for e in relevant):
        names = [n for e in relevant for n in e.validator_value]
        return [Problem(source, format_path(path), "one of the keys " + " or ".join(names), "neither")]
    if relevant:
        # Errors in branches whose type matched; the deepest ones locate the problem best.
        best_branch: dict[int, list] = {}
        for e in relevant:
            branch = e.relative_schema_path[0] if e.relative_schema_path else 0
            best_branch.setdefault(branch, []).append(e)
        branch_errors = min(
            best_branch.values(), key=lambda errs: (len(errs), -max(len(e.absolute_path) for e in errs))
        )
        return [p for e in branch_errors for p in _translate(e, source)]
    forms = " or ".join(_describe(s) for s in error.validator_value if isinstance(s, dict))
    return [Problem(source, format_path(path), forms or "one of the documented forms", typed(error.instance))]


def _describe(schema: dict) -> str:
    """A noun phrase for what a subschema accepts ('an integer', 'a mapping', 'one of ...')."""
    if not isinstance(schema, dict):
        return "a value"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = load_schema().get("$defs", {}).get(name, {})
        if name == "identifier":
            return "an identifier (letters, digits, _; not starting with a digit)"
        return _describe(target)
    if "enum" in schema:
        return "one of " + ", ".join(_json(v) for v in schema["enum"])
    kinds = schema.get("type")
    if kinds is None:
        return "a value"
    if isinstance(kinds, str):
        kinds = [kinds]
    nouns = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
             "number": "a number", "boolean": "a boolean (true/false)", "null": "null"}
    return " or ".join(nouns.get(k, k) for k in kinds)


@rules(("error", "<key>", "(YAML text) a key repeated in one mapping: YAML would silently keep only the last"))
def _index_lines(node: yaml.Node, path: tuple, lines: dict, duplicates: list, source: str) -> None:
    """Map each field path to its 1-based line, and report keys repeated within a mapping."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None:
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                duplicates.append(Problem(
                    source, format_path(path + (key,)), "each key once per mapping",
                    f"{key!r} again on line {line} (first on line {seen[key]}); YAML keeps only the last", line=line))
            else:
                seen[key] = line
            lines[path + (key,)] = line
            _index_lines(value_node, path + (key,), lines, duplicates, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, path + (index,), lines, duplicates, source)


def _with_line(problem: Problem, lines: dict[tuple, int]) -> Problem:
    if problem.line is not None or problem.path.startswith(("(", "line ")):
        return problem
    parts = _parse_path(problem.path)
    while parts:
        # YAML keys are scalars written as text; the loaded document may hold ints or bools.
        for candidate in (tuple(parts), tuple(str(p) if not isinstance(p, int) else p for p in parts)):
            if candidate in lines:
                return Problem(
                    problem.file, problem.path, problem.expected, problem.found, problem.severity, lines[candidate]
                )
        parts = parts[:-1]
    return problem


def _parse_path(text: str) -> list[Any]:
    parts: list[Any] = []
    for chunk in text.split("."):
        name, _, rest = chunk.partition("[")
        if name:
            parts.append(name)
        for index in rest.replace("]", "").split("[") if rest else []:
            parts.append(int(index) if index.lstrip("-").isdigit() else index)
    return parts


def _sort(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.file, p.severity != "error", p.line or 0))


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.path, p.expected, p.found, p.severity) not in seen:
            seen.add((p.path, p.expected, p.found, p.severity))
            out.append(p)
    return out


def _json(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


RULES = SEMANTIC_RULES + _index_lines.rules  # every rule beyond the schema, as docs/dsl_reference.md lists them
