"""Generate docs/dsl_reference.md from the schema: `python -m envforge.dsl_schema.docgen > docs/dsl_reference.md`."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

from envforge.dsl_schema import conditions
from envforge.dsl_schema.check import RULES, load_schema
from envforge.dsl_schema.names import RESERVED_NAMES

EXAMPLE = Path(__file__).with_name("examples") / "lantern_vault.yaml"
TYPE_WORDS = {"object": "mapping", "array": "list"}


def render() -> str:
    schema = load_schema()
    out = [
        "# envforge DSL reference",
        "",
        "<!-- Generated from dsl_schema/envforge_dsl.schema.json by `python -m envforge.dsl_schema.docgen >"
        " docs/dsl_reference.md`."
        " Do not edit by hand; tests/test_dsl_docs.py fails when this file is stale. -->",
        "",
        schema["description"],
        "",
        "Check documents with `envforge dsl check FILE… [--json]`, or from Python with "
        "`envforge.dsl_schema.check_file(path)` / `envforge.dsl_schema.check_document(doc, source)`. "
        "Each problem reads `FILE: path.to.field: expected …, found …` and is an error (exit status 1) or a warning.",
        "",
        "## Sections",
        "",
        "| key | required | type | what it holds |",
        "| --- | --- | --- | --- |",
    ]
    required = set(schema.get("required", []))
    for key, sub in schema["properties"].items():
        out.append(f"| `{key}` | {'yes' if key in required else 'no'} | {_type(sub)} | {_cell(_description(sub))} |")
    for key, sub in schema["properties"].items():
        out += ["", f"## `{key}`", "", _description(sub), ""]
        rows = list(_rows(sub, key, schema))
        if rows:
            out += ["| field | required | type | description |", "| --- | --- | --- | --- |"]
            out += [f"| `{path}` | {req} | {kind} | {_cell(text)} |" for path, req, kind, text in rows]
    out += ["", "## Reserved names", "",
            "These may appear in `observation.expose`, in conditions and as skin placeholders without a "
            "`state_template` path. Computed views of your own are declared under `observation.views`.", "",
            "| name | meaning |", "| --- | --- |"]
    out += [f"| `{name}` | {meaning} |" for name, meaning in RESERVED_NAMES.items()]
    out += ["", "Skin placeholders are derived from exposed paths: `a.b.c` provides every run of its segments "
            "joined by `_` (`c`, `b_c`, `a_b_c`, `a`, `a_b`, `b`); exposing a group (`agent`) provides the same "
            "for every field under it. A declared view `v` also provides `v_display`: a list-valued view shown as "
            "lines by the runtime's default skin.", "",
            "## Condition syntax", "",
            "Used by `termination.conditions` and `reward.conditions[*].if`. Parsed, never evaluated by Python;"
            " `envforge.dsl_schema.conditions.holds(text, state, names)` evaluates a condition against a"
            " state dict.", "",
            "```", _grammar(), "```", "",
            "## Semantic checks", "",
            "Rules the schema cannot express, checked after it.", "",
            "| severity | where | rule |", "| --- | --- | --- |"]
    out += [f"| {severity} | `{where}` | {rule} |" for severity, where, rule in RULES]
    out += [
        "",
        "## Complete example",
        "",
        "`dsl_schema/examples/lantern_vault.yaml` uses every extension; the paper's appendix B.4 example is "
        "`dsl_schema/examples/connect_four_b4.yaml`.",
        "",
        "```yaml",
        EXAMPLE.read_text(encoding="utf-8").rstrip(),
        "```",
        "",
    ]
    return "\n".join(out)


def _grammar() -> str:
    doc = conditions.__doc__ or ""
    start = doc.index("    condition  :=")
    end = doc.index("\n\n", start)
    return "\n".join(line[4:] for line in doc[start:end].splitlines())


def _resolve(sub: dict, root: dict) -> dict:
    while isinstance(sub, dict) and "$ref" in sub:
        extra = {k: v for k, v in sub.items() if k != "$ref"}
        sub = {**root["$defs"][sub["$ref"].rsplit("/", 1)[-1]], **extra}
    merged = dict(sub)
    for part in sub.get("allOf", []):
        part = _resolve(part, root)
        merged["properties"] = {**part.get("properties", {}), **merged.get("properties", {})}
        merged["required"] = sorted(set(part.get("required", [])) | set(merged.get("required", [])))
    return merged


def _rows(sub: dict, path: str, root: dict, depth: int = 0) -> Iterator[tuple[str, str, str, str]]:
    sub = _resolve(sub, root)
    if depth > 6:
        return
    required = set(sub.get("required", []))
    for key, child in sub.get("properties", {}).items():
        child_r = _resolve(child, root)
        yield f"{path}.{key}", "yes" if key in required else "no", _type(child_r, root), _description(child_r, child)
        yield from _rows(child_r, f"{path}.{key}", root, depth + 1)
    if isinstance(sub.get("additionalProperties"), dict):
        child = _resolve(sub["additionalProperties"], root)
        if child.get("properties") or child.get("anyOf"):
            yield f"{path}.<name>", "no", _type(child, root), _description(child)
            yield from _rows(child, f"{path}.<name>", root, depth + 1)
    items = sub.get("items")
    if isinstance(items, dict):
        items = _resolve(items, root)
        for option in [items] + [_resolve(o, root) for o in items.get("anyOf", [])]:
            if option.get("properties"):
                yield from _rows({k: v for k, v in option.items() if k != "anyOf"}, f"{path}[]", root, depth + 1)


def _type(sub: dict, root: dict | None = None) -> str:
    root = root or load_schema()
    sub = _resolve(sub, root)
    if "enum" in sub:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in sub["enum"])
    typed_options = [o for o in sub.get("anyOf", []) if {"type", "enum", "$ref"} & set(o)]
    if typed_options and "type" not in sub:
        return " or ".join(_type(option, root) for option in typed_options)
    kinds = sub.get("type", "any")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    text = " or ".join(TYPE_WORDS.get(k, k) for k in kinds)
    if "pattern" in sub and "identifier" in sub.get("description", ""):
        text = "identifier"
    if "minimum" in sub:
        text += f" ≥ {sub['minimum']}"
    if isinstance(sub.get("items"), dict) and "array" in kinds:
        item = _resolve(sub["items"], root)
        if "type" not in item and any({"type", "$ref"} & set(o) for o in item.get("anyOf", [])):
            text += " of (" + " or ".join(_type(o, root) for o in item["anyOf"]) + ")"
        elif not item.get("properties"):
            text += f" of {_type(item, root)}"
    return text


def _description(sub: dict, original: dict | None = None) -> str:
    text = (original or {}).get("description") or sub.get("description", "")
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    sys.stdout.write(render())
