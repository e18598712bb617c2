"""docs/dsl_reference.md is generated from the schema and must not drift from it."""
from pathlib import Path

from envforge.dsl_schema import docgen, load_schema

ROOT = Path(__file__).resolve().parent.parent


def test_committed_reference_matches_the_schema():
    committed = (ROOT / "docs" / "dsl_reference.md").read_text(encoding="utf-8")
    assert committed == docgen.render(), "regenerate: python -m dsl_schema.docgen > docs/dsl_reference.md"


def test_reference_documents_every_section_and_field_of_the_schema():
    text = docgen.render()
    for section, sub in load_schema()["properties"].items():
        assert f"## `{section}`" in text
        for field in sub.get("properties", {}):
            assert f"`{section}.{field}`" in text


def test_reference_contains_the_complete_example():
    assert (ROOT / "dsl_schema" / "examples" / "lantern_vault.yaml").read_text(
        encoding="utf-8"
    ).strip() in docgen.render()
