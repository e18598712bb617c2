"""An exported verifiers package installs into a fresh virtual environment with nothing but pip, beside
the envforge wheel it was exported by, and resolves no package of the index named like envforge but
not it (`envforge` there is another project; ours is envforge-rl, not on the index): the export
prints the one pip command that does it, naming the wheel. Then verifiers' own vf-eval plays a level.
The dependencies come from the package index (pip's cache), so this needs it."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="the verifiers extra is not installed (envforge-rl[verifiers])")

from envforge.pipeline.testing.llm_server import LLMServer, Reply  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import wheel_demo  # noqa: E402

pytestmark = pytest.mark.slow
STEP = re.compile(r"This is step (\d+) of at most")


def run(argv: list, cwd: Path, env: dict, timeout: int = 1500) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_an_exported_package_installs_from_a_fresh_venv_beside_the_wheel_and_plays(tmp_path):
    wheel = wheel_demo.build_wheel(tmp_path)
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")  # pip, from the interpreter's own copy
    bin_ = tmp_path / "venv" / "bin"
    env = {k: v for k, v in os.environ.items() if k not in wheel_demo.SECRETS}
    env.update(HOME=str(tmp_path / "home"), NO_PROXY="127.0.0.1,localhost", ENVFORGE_CACHE=str(tmp_path / "c.sqlite"))
    empty = tmp_path / "empty"
    empty.mkdir()
    run([bin_ / "pip", "install", "-q", wheel], empty, env)

    printed = run([bin_ / "envforge", "export", "verifiers", ROOT / "generated_envs/reference/crate_dock",
                   "--out", "exported"], empty, env)
    project = empty / "exported" / "envforge_crate_dock"
    command = f"pip install '{wheel}[verifiers]' exported/envforge_crate_dock"
    assert f"({command};" in printed, printed  # the wheel it was installed from, not the index's name
    assert f"pip install '{wheel}[verifiers]' ." in (project / "README.md").read_text()
    run([bin_ / "pip", "install", "-q", f"{wheel}[verifiers]", "exported/envforge_crate_dock"], empty, env)

    installed = {p["name"].lower() for p in json.loads(run([bin_ / "pip", "list", "--format", "json"], empty, env))}
    assert {"envforge-rl", "envforge-crate-dock", "verifiers"} <= installed
    assert "envforge" not in installed  # the index's other envforge was never resolved
    shutil.rmtree(project)  # what plays is the installed package, not the folder it came from

    actions = [json.loads(line) for line in run([bin_ / "python", "-c", (
        "import envforge, json, pathlib\n"
        f"env = envforge.open({str(ROOT / 'generated_envs/reference/crate_dock')!r})\n"
        f"for line in pathlib.Path({str(ROOT / 'examples/crate_dock_level_01.actions')!r}).read_text().splitlines():\n"
        "    if line.strip() and not line.startswith('#'): print(json.dumps(env.parse_action(line)))\n")],
        empty, env).splitlines()]
    server = LLMServer().start()

    def rule(n, request):
        steps = STEP.findall(json.dumps(request["body"].get("messages", [])))
        return Reply(f"<action>{json.dumps(actions[(int(steps[-1]) if steps else 1) - 1])}</action>")

    server.rule = rule
    try:
        run([bin_ / "vf-eval", "envforge_crate_dock", "-m", "gpt-4o-mini", "--client.base-url", server.openai_url,
             "--client.api-key-var", "OPENAI_API_KEY", "--env.taskset.max-levels", "1", "-n", "1", "--no-push",
             "--no-rich", "-o", "vf"], empty, dict(env, OPENAI_API_KEY="test-key"))
    finally:
        server.stop()
    (traces,) = (empty / "vf").rglob("traces.jsonl")
    (episode,) = [json.loads(line) for line in traces.read_text().splitlines()]
    (trace,) = episode["traces"]
    assert episode["ok"] and trace["task"]["data"]["level"] == "levels/level_01.yaml"
    assert trace["rewards"]["normalized"]["score"] == 1.0 and trace["metrics"]["solved"] == 1.0
    assert trace["info"]["envforge_episode"]["env"] == "crate_dock"
