"""The envforge environment DSL: its JSON Schema, the semantic checker, conditions and actions.

    from dsl_schema import check_file, check_document, is_valid
    problems = check_file("generated_envs/x/config.yaml")
    if not is_valid(problems):
        prompt += feedback_for_model(problems)
"""
from dsl_schema.check import (
    SCHEMA_PATH,
    check_document,
    check_file,
    check_text,
    feedback_for_model,
    is_valid,
    load_schema,
)
from dsl_schema.names import RESERVED_NAMES
from dsl_schema.problems import Problem, errors, warnings

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
