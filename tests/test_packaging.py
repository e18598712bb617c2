"""envforge installs like any package: a wheel carries templates, the DSL schema, prices and the
bundled demo recordings, and an installed envforge run from an empty folder gives the same offline
demo as the editable install (scripts/wheel_demo.py; .ci/run also runs it with the dependencies
installed from the index)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_an_installed_wheel_run_from_an_empty_folder_gives_the_editable_demo_result(generate_demo):
    # the editable side is the session's one run of README's command (conftest.py), not run again
    assert generate_demo.returncode == 0, generate_demo.stdout[-2000:] + generate_demo.stderr[-2000:]
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheel_demo.py"), "--reuse-deps",
                           "--editable-out", str(generate_demo.out)], capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "same demo result"
    wheel = next(line for line in lines if line.startswith("installed wheel, from an empty folder: "))
    # The demo's known outcome: two accepted, the card game rejected at reliability.
    assert '"accepted": ["a_lighthouse_keeper_must_keep_three_962115", "a_robot_in_a_dark_server_2ea2c6"]' in wheel
    assert '"rejected": {"a_card_game_of_higher_or_lower_against_406967": "reliability"}' in wheel
    assert "TemplateNotFound" not in done.stderr


def test_generate_without_themes_says_what_it_expected(capsys, tmp_path):
    from envforge.pipeline.cli import main

    assert main(["generate", "--out", str(tmp_path / "out")]) == 2
    assert "expected --themes FILE (or --demo for the bundled offline demo), found neither" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_demo_themes_and_recordings_are_found_through_the_package():
    from envforge.pipeline import paths
    from envforge.pipeline.llm.config import resolve

    assert paths.DEMO_THEMES.is_file() and (paths.TEMPLATES_DIR / "agents" / "react_system.j2").is_file()
    assert resolve(provider="replay").replay_dir == paths.BUNDLED_REPLAY_DIR


def test_the_distribution_name_is_declared_once_and_is_not_the_index_s_other_envforge():
    """pyproject.toml's name is pipeline.DISTRIBUTION, what every install hint and export names; the
    index's `envforge` is an unrelated project (issue 35), so an export naming it would install that."""
    import tomllib

    from envforge.pipeline import DISTRIBUTION, install_hint

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION != "envforge"
    assert project["scripts"]["envforge"] == "envforge.pipeline.cli:main"
    # envforge-rl is not on the index yet: a hint names the checkout pip recorded installing this one from
    assert install_hint("gym") == f"pip install '{ROOT}[gym]'"


def test_an_install_hint_without_a_recorded_source_names_the_distribution(monkeypatch):
    import envforge.pipeline as pipeline

    monkeypatch.setattr(pipeline, "install_source", lambda: None)  # installed from an index: pip records no path
    assert pipeline.install_hint("gym") == "pip install 'envforge-rl[gym]'"
