"""envforge reskin: template skins over the reference environments (on copies) pass the
dynamics-identity check; a skin that touches the state, or renders nothing differently, fails it."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.reskin.model import reskin_with_model
from envforge.pipeline.reskin.styles import template_source
from envforge.pipeline.sandbox import SandboxFailure, Worker
from envforge.pipeline.testing.llm_server import Reply
from envforge.pipeline.testing.tiny_env import write_env

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

REFERENCE = Path(__file__).resolve().parent.parent / "generated_envs" / "reference"


def reskin(env_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return envforge("reskin", env_dir, "--sequences", "1", *flags)


def copy_of(name: str, tmp_path: Path, generated: bool = True) -> Path:
    """A copy of a reference environment; `generated`: standing for a folder `envforge generate` made
    (its manifest's origin), whose manifest lists its skins; a reference folder's is not changed."""
    env = Path(shutil.copytree(REFERENCE / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")))
    if generated:
        _as_generated(env)
    return env


def _as_generated(env: Path) -> None:
    path = env / "manifest.json"
    data = json.loads(path.read_text()) if path.exists() else {"name": env.name}
    path.write_text(json.dumps({**data, "origin": "envforge generate"}, indent=2))


def test_a_skin_of_a_reference_environment_changes_none_of_its_tracked_files(tmp_path):
    env = copy_of("crate_dock", tmp_path, generated=False)
    git = ["git", "-C", str(env), "-c", "user.name=t", "-c", "user.email=t@t"]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "reference"]):
        subprocess.run([*git, *step], check=True)
    result = reskin(env, "--style", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all"], capture_output=True,
                            text=True, check=True).stdout
    assert status == "?? skins/json.py\n"  # the skin beside the folder's files; manifest.json untouched
    assert envforge("evaluate", env, "--agent", "random", "--skin", "json", "--max-levels", "1", "--runs", "1",
                    "--out", tmp_path / "ev", cwd=tmp_path).returncode == 0  # and it is used as a skin


@pytest.mark.parametrize("name, style", [("crate_dock", "json"), ("tide_pool", "inverse")])
def test_template_skin_passes_the_identity_check_and_is_listed(name, style, tmp_path):
    env = copy_of(name, tmp_path)
    result = reskin(env, "--style", style)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "dynamics identical on 15 levels" in result.stdout
    manifest = json.loads((env / "manifest.json").read_text())
    entry = manifest["skins"][style]
    assert entry["file"] == f"skins/{style}.py" and entry["identity"]["renderings_differing"] > 0
    assert manifest["files"][f"skins/{style}.py"] == entry["sha256"]
    with Worker(env) as plain, Worker(env, skin=style) as skinned:
        a = plain.call("reset", level="levels/level_01.yaml", want_state=True)
        b = skinned.call("reset", level="levels/level_01.yaml", want_state=True)
    assert a["state_hash"] == b["state_hash"] and a["raw_obs"] == b["raw_obs"]
    assert a["observation"] != b["observation"]
    if style == "json":
        assert json.loads(b["observation"])["observation"] == a["raw_obs"]


def test_inverse_skin_inverts_the_drawn_map_and_keeps_the_legend(tmp_path):
    """AutoEnv E.3: symbols swapped (wall <-> floor on crate_dock), the legend still claims the originals."""
    env = copy_of("crate_dock", tmp_path)
    result = reskin(env, "--style", "inverse", "--hint")
    assert result.returncode == 0 and "dynamics identical on 15 levels" in result.stdout
    source = (env / "skins" / "inverse.py").read_text()
    assert "SWAP = ('#', '.')" in source and "'#' and '.' trade places" in source
    with Worker(env) as plain, Worker(env, skin="inverse") as skinned:
        a = plain.call("reset", level="levels/level_01.yaml")["observation"].splitlines()
        b = skinned.call("reset", level="levels/level_01.yaml")["observation"].splitlines()
    assert b[0] == "Note: the environment may contain semantic inversions."
    b = b[1:]
    assert b[1] == a[1].translate(str.maketrans("#.", ".#"))  # the board's top wall, drawn as floor
    assert [x for x in b if x.startswith("Legend")] == [x for x in a if x.startswith("Legend")]


def test_skin_that_changes_the_state_fails_the_identity_check(tmp_path):
    env = copy_of("crate_dock", tmp_path)
    (env / "skins").mkdir()
    (env / "skins" / "sneaky.py").write_text(
        "def render(omega, env):\n"
        "    # 'helpfully' nudges every crate one tile east when it draws them\n"
        "    env._state['crates'] = [[x + 1, y] for x, y in env._state['crates']]\n"
        "    return env.base_render(omega)\n")
    result = reskin(env, "--check", "sneaky")
    assert result.returncode == 1
    assert "REJECTED" in result.stdout and "state_hash differs" in result.stdout
    assert "the skin changes the dynamics" in result.stdout
    assert not (env / "skins" / "sneaky.py").exists() and (env / "skins" / "_rejected" / "sneaky.py").exists()
    assert "sneaky" not in json.loads((env / "manifest.json").read_text()).get("skins", {})


def test_skin_that_renders_like_the_env_fails_and_a_broken_one_names_its_line(tmp_path):
    env = write_env(tmp_path / "corridor")
    (env / "skins").mkdir()
    (env / "skins" / "same.py").write_text("def render(omega, env):\n    return env.base_render(omega)\n")
    (env / "skins" / "broken.py").write_text("def render(omega, env):\n    return 1 / 0\n")
    same = reskin(env, "--check", "same")
    assert same.returncode == 1 and "renders all" in same.stdout and "exactly as the env does" in same.stdout
    broken = reskin(env, "--check", "broken")
    assert broken.returncode == 1 and "skins/broken.py:2" in broken.stdout and "ZeroDivisionError" in broken.stdout


def test_inverse_needs_a_drawn_map_and_a_missing_skin_does_not_load(tmp_path):
    env = write_env(tmp_path / "corridor")
    result = reskin(env, "--style", "inverse")
    assert result.returncode == 2 and "drawn maps in the semantic observation" in result.stderr
    with pytest.raises(SandboxFailure, match="skins/nope.py"):
        Worker(env, skin="nope")


def test_model_written_skin_is_repaired_from_the_check_feedback(make_llm_client, llm_server, tmp_path):
    env = write_env(tmp_path / "corridor")
    _as_generated(env)
    bad = "```python\ndef render(omega, env):\n    env._state['pos'] = 0\n    return 'where am I?'\n```"
    good = (
        "```python\ndef render(omega, env):\n"
        "    return f\"Turn {omega['t']}. You stand on tile {omega['pos']}; the goal is tile {omega['goal']}.\"\n```"
    )
    llm_server.script = [Reply(bad), Reply(good)]

    async def main():
        async with make_llm_client("openai") as client:
            return await reskin_with_model(EnvSpec.open(env), client, "terse radio", "radio",
                                           random_sequences=1)

    result = asyncio.run(main())
    assert result.report.ok and result.file == env / "skins" / "radio.py"
    assert "written by" in result.file.read_text()
    feedback = json.dumps(llm_server.requests[1]["body"])
    assert "state_hash differs" in feedback and "the skin changes the dynamics" in feedback
    assert json.loads((env / "manifest.json").read_text())["skins"]["radio"]["style"] == "model: terse radio"


def test_probe_renders_its_items_with_a_skin(tmp_path):
    env = copy_of("crate_dock", tmp_path)
    (env / "skins").mkdir()
    (env / "skins" / "json.py").write_text(template_source("json", "crate_dock", "json"))
    out = tmp_path / "items.jsonl"
    result = envforge("probe", env, "--kind", "predict,change", "--n", "3", "--skin", "json", "--out", out)
    assert result.returncode == 0, result.stdout + result.stderr
    for line in out.read_text().splitlines():
        item = json.loads(line)
        assert item["skin"] == "json"
        for text in item.get("candidates", []) + item.get("observations", []):
            assert "board" in json.loads(text)["observation"]
