"""What a sandboxed environment can see of the host file system."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envforge.pipeline.sandbox import Worker, capabilities
from envforge.pipeline.testing.tiny_env import write_env

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(capabilities()["mode"] != "namespaces",
                                reason="file-system confinement needs root and unshare")

PEEK = '''
import json, os
def _look(path):
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        return "denied: " + type(e).__name__
'''


def test_env_sees_envforge_packages_but_not_the_checkout_around_them(tmp_path):
    probe = {"checkout": str(ROOT), "home": str(Path.home()), "tmp": "/tmp", "tests": str(ROOT / "tests")}
    env = write_env(
        tmp_path / "peek",
        replace={
            "env_main.py": (
                "    def render_skin(self, omega):\n",
                f"    def render_skin(self, omega):\n        return"
                f" json.dumps({{k: _look(v) for k, v in {probe!r}.items()}})\n\n    def _unused(self, omega):\n",
            )
        },
    )
    (env / "env_main.py").write_text(PEEK + (env / "env_main.py").read_text())
    with Worker(env) as worker:
        seen = json.loads(worker.call("reset", level="levels/level_01.yaml")["observation"])
    assert "pipeline" in seen["checkout"] and "dsl_schema" in seen["checkout"]
    assert "README.md" not in seen["checkout"] and "tests" not in seen["checkout"]
    assert not isinstance(seen["tests"], list) or seen["tests"] == []
    assert seen["tmp"] == [] or str(tmp_path.name) not in seen["tmp"]
    assert not isinstance(seen["home"], list) or ".bashrc" not in seen["home"]
