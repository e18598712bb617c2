"""The same game twice is caught (issue 36 item 5): verify's execution stage fingerprints an
environment's dynamics from fixed action sequences on its levels (pipeline/verify/dynamics.py);
a copy under another skin and name fingerprints as its source, another game does not."""
from __future__ import annotations

import shutil
from pathlib import Path

from cli_kit import envforge

from envforge.pipeline.verify.dynamics import dynamics_of, same_dynamics

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"


def _reskinned(source: Path, to: Path) -> Path:
    """`source` under another name and skin: the board drawn with other glyphs (its docs and crates
    as # and B), another instruction; its rules and levels as they were."""
    shutil.copytree(source, to)
    obs = to / "env_obs.py"
    obs.write_text(obs.read_text().replace('"*" if rows[y][x] == "o" else "$"', '"#" if rows[y][x] == "o" else "B"')
                   .replace('row.count("*")', 'row.count("#")'))
    (to / "agent_instruction.txt").write_text("You run a harbour's cargo floor: push every box onto a berth.\n")
    return to


def test_a_reskinned_copy_has_its_sources_dynamics_and_the_two_reference_envs_differ(tmp_path):
    folders = {"crate_dock": shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock"),
               "tide_pool": shutil.copytree(REFERENCE / "tide_pool", tmp_path / "tide_pool")}
    folders["harbour_cargo"] = _reskinned(REFERENCE / "crate_dock", tmp_path / "harbour_cargo")
    for name, folder in folders.items():
        done = envforge("verify", folder, "--stages", "execution", "--write")
        assert done.returncode == 0, (name, done.stderr[-2000:])
    prints = {name: dynamics_of(folder) for name, folder in folders.items()}
    assert all(p.startswith("dynamics/1:") for p in prints.values()), prints
    assert "B" in (folders["harbour_cargo"] / "env_obs.py").read_text()  # the skin did change
    assert prints["harbour_cargo"] == prints["crate_dock"] != prints["tide_pool"]
    assert same_dynamics(prints.items()) == {"crate_dock": ["harbour_cargo"], "harbour_cargo": ["crate_dock"]}


def test_a_folder_without_a_readable_verification_has_no_fingerprint_and_matches_nothing(tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "verification.json").write_text("{not json")
    assert dynamics_of(tmp_path / "e") == "" and dynamics_of(tmp_path / "missing") == ""
    assert same_dynamics([("a", ""), ("b", ""), ("c", "x")]) == {}
