"""The hand-written reference environments are valid DSL documents."""
from pathlib import Path

import pytest

from envforge.dsl_schema import check_file, errors

REFERENCE = Path(__file__).resolve().parent.parent / "generated_envs" / "reference"
CONFIGS = sorted(REFERENCE.glob("*/config.yaml"))


def test_reference_environments_exist():
    assert CONFIGS, f"no config.yaml under {REFERENCE}"


@pytest.mark.parametrize("config", CONFIGS, ids=[c.parent.name for c in CONFIGS])
def test_reference_config_has_no_dsl_errors(config):
    assert errors(check_file(config)) == [], "\n".join(str(p) for p in errors(check_file(config)))
