"""Where envforge's own data lives (schema, templates, reference environments).

envforge is installed editable (see README), so these resolve inside the checkout.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DSL_SCHEMA_DIR = ROOT / "dsl_schema"
TEMPLATES_DIR = ROOT / "templates"
GENERATED_ENVS_DIR = ROOT / "generated_envs"
REFERENCE_ENVS_DIR = GENERATED_ENVS_DIR / "reference"
