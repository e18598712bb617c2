"""The envforge environment DSL: its JSON Schema, the semantic checker, conditions and actions.

    from envforge.dsl_schema import check_file, check_document, is_valid
    problems = check_file("generated_envs/x/config.yaml")
    if not is_valid(problems):
        prompt += feedback_for_model(problems)
"""
from importlib import import_module

# Loaded on first use (PEP 562): the checker pulls in jsonschema, which a sandbox worker that
# only needs `Problem` must not pay for at every start.
_WHERE = {name: "envforge.dsl_schema.check" for name in (
    "SCHEMA_PATH", "check_document", "check_file", "check_text", "feedback_for_model", "is_valid", "load_schema")}
_WHERE.update({name: "envforge.dsl_schema.problems" for name in ("Problem", "errors", "warnings")})
_WHERE["RESERVED_NAMES"] = "envforge.dsl_schema.names"


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'dsl_schema' has no attribute {name!r}")


__all__ = [
    "SCHEMA_PATH",
    "RESERVED_NAMES",
    "Problem",
    "check_document",
    "check_file",
    "check_text",
    "errors",
    "feedback_for_model",
    "is_valid",
    "load_schema",
    "warnings",
]
