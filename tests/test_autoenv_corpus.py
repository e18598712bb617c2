"""AutoEnv-36 environments (the development corpus) load and are checked on envforge's runtime."""
from __future__ import annotations

import json

import pytest
from autoenv_corpus import NAMES, copy_env
from cli_kit import envforge as cli


@pytest.mark.slow  # measured: a whole check of each of the corpus's environments
@pytest.mark.parametrize("name", NAMES)
def test_check_loads_each_autoenv_env_and_scans_only_its_own_code(name, tmp_path):
    env = copy_env(name, tmp_path)
    result = cli("check", str(env), "--json")
    report = json.loads(result.stdout)
    problems = report["problems"]
    assert not [p for p in problems if p["check"] == "load"], problems
    assert not [p for p in problems if "ImportError" in p["found"] or "ModuleNotFoundError" in p["found"]], problems
    # Helper scripts beside the env are listed, never scanned as the env.
    assert "env_main_use.py" in report["stats"]["not_imported"]
    assert not [p for p in problems if p["file"] == "env_main_use.py"], problems
    # The generator saves its level into the private copy; the folder given is left alone.
    assert not [p for p in problems if "PermissionError" in p["found"]], problems


def test_check_names_helper_scripts_it_did_not_scan(tmp_path):
    env = copy_env("20_GridNavigation", tmp_path)
    result = cli("check", str(env))
    assert "note: not imported by the environment, so not checked: calculate_max_rewards.py, env_main_use.py" \
        in result.stdout, result.stdout
    assert "sys.exit" not in result.stdout
