"""A user's own agent (`--agent FILE.py:ATTR`): the interface README documents, the example agent
in examples/, and short display names."""
from __future__ import annotations

import json
import re
from pathlib import Path

from envforge.pipeline.cli import main

ROOT = Path(__file__).resolve().parent.parent
CRATE = ROOT / "generated_envs" / "reference" / "crate_dock"
EXAMPLE = ROOT / "examples" / "agents" / "explorer.py"


def records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]


def test_the_example_agent_plays_and_is_named_by_its_file_stem(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["evaluate", str(CRATE), "--agent", f"{EXAMPLE}:Explorer", "--max-levels", "1", "--runs", "1",
                 "--max-steps", "15", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["agent"] == "explorer:Explorer"
    (record,) = records(out)
    assert record["agent"] == "explorer:Explorer" and str(tmp_path) not in json.dumps(record)
    assert record["env_steps"] > 0 and record["valid_actions"] > 0
    assert record["stop_reason"] not in ("agent_error", "env_error"), record["stop_detail"]


def test_agent_name_labels_the_records(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["evaluate", str(CRATE), "--agent", f"{EXAMPLE}:Explorer", "--agent-name", "my explorer",
                 "--max-levels", "1", "--runs", "1", "--max-steps", "5", "--out", str(out)]) == 0
    assert [r["agent"] for r in records(out)] == ["my explorer"]
    assert "evaluate: my explorer on 1 environment(s)" in capsys.readouterr().out


def test_an_empty_agent_name_is_refused(tmp_path, capsys):
    try:
        status = main(["evaluate", str(CRATE), "--agent", "random", "--agent-name", " ", "--out", str(tmp_path / "o")])
    except SystemExit as e:
        status = e.code
    assert status == 2
    assert "--agent-name: expected a name of 1 to 80 printable characters" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_readme_documents_every_key_the_agent_gets(tmp_path, capsys):
    """An agent that writes down what it was given: every key is in README's tables."""
    seen = tmp_path / "seen.json"
    agent = tmp_path / "recorder.py"
    agent.write_text(
        "import json\n"
        "def run(env, env_info):\n"
        "    env.reset(mode='load', world_id=env_info['world_id'])\n"
        "    _, reward, done, info = env.step({'action': 'wait', 'params': {}})\n"
        f"    open({str(seen)!r}, 'w').write(json.dumps({{'env_info': sorted(env_info), 'info': sorted(info)}}))\n")
    assert main(["evaluate", str(CRATE), "--agent", f"{agent}:run", "--max-levels", "1", "--runs", "1",
                 "--out", str(tmp_path / "out")]) == 0
    assert [r["agent"] for r in records(tmp_path / "out")] == ["recorder:run"]
    given = json.loads(seen.read_text())
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Your own agent"):]
    section = section[:section.index("\n## ")]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    assert set(given["env_info"]) == documented
    assert all(f'"{key}"' in section for key in given["info"])
    assert "examples/agents/explorer.py:Explorer" in section


def test_a_module_beside_the_agent_does_not_shadow_envforges_own_imports(tmp_path):
    """Issue 22 item 6: the agent's folder went first on sys.path, so a matplotlib.py beside it was
    imported by the report code. The agent still imports its own helper module."""
    import os
    import subprocess
    import sys

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "matplotlib.py").write_text(
        "open(__file__ + '.imported', 'w').close()\nraise ImportError('the fake one')\n"
    )
    (folder / "helper.py").write_text("def first_action(env):\n    return {'action': 'wait', 'params': {}}\n")
    (folder / "agent.py").write_text(
        "import helper\n\n\ndef run(env, env_info):\n    env.step(helper.first_action(env))\n"
    )
    out = tmp_path / "out"
    done = subprocess.run([str(Path(sys.executable).parent / "envforge"), "evaluate", str(CRATE), "--agent",
                           f"{folder / 'agent.py'}:run", "--max-levels", "1", "--runs", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, ENVFORGE_PLOTS="on"),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (folder / "matplotlib.py.imported").exists()
    assert (out / "per_env.png").stat().st_size > 0
    (record,) = records(out)
    assert record["env_steps"] == 1 and record["stop_reason"] == "agent_stopped"
