"""`envforge evaluate --skin NAME` and `--probes FILE`: skins and derived tests from the evaluate command."""
from __future__ import annotations

import json
import shutil

import pytest
from cli_kit import ROOT, envforge

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)


def test_evaluate_through_a_skin_and_on_probe_items(tmp_path):
    shutil.copytree(ROOT / "generated_envs/reference/crate_dock", tmp_path / "crate_dock")
    missing = envforge("evaluate", "crate_dock", "--agent", "random", "--skin", "json", "--out", "ev", cwd=tmp_path)
    assert missing.returncode == 2
    assert "--skin json: expected the skin in every environment" in missing.stderr
    assert envforge("reskin", "crate_dock", "--style", "json", cwd=tmp_path).returncode == 0

    skinned = envforge("evaluate", "crate_dock", "--agent", "random", "--skin", "json", "--max-levels", "2",
                       "--runs", "1", "--out", "ev", "--json", cwd=tmp_path)
    summary = json.loads(skinned.stdout)
    assert skinned.returncode == 0, skinned.stderr
    assert summary["agent"] == "random@json" and summary["envs"]["crate_dock"]["episodes"] == 2
    first = json.loads((tmp_path / "ev" / "episodes.jsonl").read_text().splitlines()[0])
    assert first["agent"] == "random@json"
    trajectory = next((tmp_path / "ev" / "trajectories" / "crate_dock" / "random_json").glob("*.jsonl"))
    turn = json.loads(trajectory.read_text().splitlines()[1])
    assert json.loads(turn["observation"])["observation"]["board"][0] == "#######"  # rendered by the json skin

    assert (
        envforge("probe", "crate_dock", "--kind", "predict", "--n", "4", "--out", "p.jsonl", cwd=tmp_path).returncode
        == 0
    )
    scored = envforge("evaluate", "--probes", "p.jsonl", "--agent", "oracle", "--out", "ev", "--json", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "1.0" in scored.stdout and "predict" in scored.stdout
    assert envforge("evaluate", "--agent", "random", cwd=tmp_path).returncode == 2
