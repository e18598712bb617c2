"""Property: whatever a model or a person does to a valid document, the checker answers calmly.

It never raises; a document is either valid or has at least one error located at a field path;
and whenever the raw JSON Schema rejects a document, the checker reports an error too.
"""
import copy
import string
from pathlib import Path

import jsonschema
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envforge.dsl_schema import check_document, check_text, is_valid, load_schema

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "dsl_schema" / "examples").glob("*.yaml"))
VALID = [yaml.safe_load(p.read_text()) for p in EXAMPLES]
TEXTS = [p.read_text() for p in EXAMPLES]
SCHEMA = jsonschema.Draft202012Validator(load_schema())

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["", "t", "game.winner != 0", "a ==", "{t}", "drop disk", "win_rewards"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(string.ascii_letters + "_.", max_size=8), inner, max_size=3)),
    max_leaves=6)


def containers(doc, path=()):
    """Every (path, container) in the document, the document itself first."""
    yield path, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, child in items:
        if isinstance(child, (dict, list)):
            yield from containers(child, path + (key,))


@st.composite
def mutated_documents(draw):
    doc = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 3))):
        targets = list(containers(doc))
        _, target = draw(st.sampled_from(targets))
        keys = list(target.keys()) if isinstance(target, dict) else list(range(len(target)))
        action = draw(st.sampled_from(["replace", "delete", "insert", "rename"] if keys else ["insert"]))
        if action == "insert":
            if isinstance(target, dict):
                target[draw(st.text(string.ascii_letters + "_", min_size=1, max_size=10))] = draw(values)
            else:
                target.insert(draw(st.integers(0, len(target))), draw(values))
            continue
        key = draw(st.sampled_from(keys))
        if action == "replace":
            target[key] = draw(values)
        elif action == "delete":
            del target[key]
        elif isinstance(target, dict):
            target[key + draw(st.sampled_from(["s", "_", "x"]))] = target.pop(key)
    return doc


def assert_answer_is_well_formed(problems):
    assert all(p.severity in ("error", "warning") for p in problems)
    assert not any(p.path == "(checker)" for p in problems), [str(p) for p in problems]
    assert all(p.path and p.expected and p.found for p in problems)


@settings(max_examples=300)
@given(mutated_documents())
def test_mutated_documents_are_valid_or_have_a_located_error(doc):
    problems = check_document(doc, "mutant.yaml")
    assert_answer_is_well_formed(problems)
    if not SCHEMA.is_valid(doc):
        assert not is_valid(problems), "the schema rejects this document but the checker reported no error"
    for problem in problems:
        assert str(problem).startswith(f"mutant.yaml: {problem.path}: expected ")


@settings(max_examples=150)
@given(st.sampled_from(TEXTS), st.data())
def test_mangled_yaml_text_never_raises(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    insert = data.draw(st.sampled_from(["", ":", "  ", "\n", "- ", "{", "]", "\t", "'", "&a *a", "? "]))
    problems = check_text(text[:start] + insert + text[end:], "mangled.yaml")
    assert_answer_is_well_formed(problems)


@settings(max_examples=100)
@given(values)
def test_any_value_as_document_never_raises(value):
    problems = check_document(value, "x.yaml")
    assert_answer_is_well_formed(problems)
    assert not is_valid(problems)
