"""Where envforge's own data lives (schema, templates, recordings, reference environments).

In a checkout (an editable install, README) these are the checkout's top-level folders. A built
wheel carries the same folders as pipeline/_data/ (setup.py copies them in at build time), so an
installed envforge finds them without a checkout, run from any folder.
"""
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
INSTALLED_DATA = PACKAGE / "_data"
INSTALLED = INSTALLED_DATA.is_dir()
ROOT = INSTALLED_DATA if INSTALLED else PACKAGE.parent  # holds templates/, examples/, generated_envs/reference/
DSL_SCHEMA_DIR = PACKAGE.parent / "dsl_schema"  # a package of its own, beside pipeline in both cases
TEMPLATES_DIR = ROOT / "templates"
EXAMPLES_DIR = ROOT / "examples"
BUNDLED_REPLAY_DIR = EXAMPLES_DIR / "replay"
DEMO_THEMES = EXAMPLES_DIR / "themes.txt"  # the themes of the offline demo (`envforge generate --demo`)
REFERENCE_ENVS_DIR = ROOT / "generated_envs" / "reference"
# Where generate writes by default, for every install (wheel or editable): the current folder's
# generated_envs/, never the checkout's (a run from another folder must not land in the checkout).
GENERATED_ENVS_DIR = Path("generated_envs")
