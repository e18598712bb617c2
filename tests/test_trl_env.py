"""envforge environments in TRL's `environment_factory` shape (envforge.integrations.trl), driven as
TRL's GRPOTrainer drives one: its tools found with inspect.getmembers(instance, inspect.ismethod) less
`reset`, `get_reward` and private names, a row of the dataset given to `reset(**row)`, each tool called
with the model's arguments as keywords, `get_reward()` once the rollout is over. TRL itself is not
installed (it brings torch): the tool schemas are checked with transformers' get_json_schema, what
TRL's chat templates render tools with, where transformers is installed.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys

import pytest
from cli_kit import REFERENCE, ROOT

from envforge.integrations.trl import TRLEnvironments
from envforge.pipeline.errors import UserError

pytestmark = pytest.mark.slow

CRATE_DOCK = REFERENCE / "crate_dock"


def tools_of(env) -> dict:
    return {name: m for name, m in inspect.getmembers(env, predicate=inspect.ismethod)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def test_the_declared_actions_are_the_tools_and_the_witness_scores_one():
    envs = TRLEnvironments(CRATE_DOCK, split="test", max_levels=2)
    factory = envs.environment_factory
    assert inspect.isclass(factory) and factory.__name__ == "Envforge_crate_dock"
    rows = envs.rows
    assert [r["level"] for r in rows] == ["levels/level_01.yaml", "levels/level_02.yaml"]
    assert "==== How to act ====" in rows[0]["prompt"][0]["content"]  # evaluate's tools agent's system text
    env = factory()
    tools = tools_of(env)
    assert sorted(tools) == ["move", "wait"]
    assert list(inspect.signature(tools["move"]).parameters) == ["direction"]
    assert '(choices: ["north", "south", "east", "west"])' in tools["move"].__doc__
    first = env.reset(**rows[1])
    assert first.startswith("\n\n") and "This is step 1 of at most 30." in first
    witness = json.loads((CRATE_DOCK / "level_max_rewards.json").read_text())["levels"]["level_02.yaml"]["witness"]
    for action in witness:
        shown = tools[action["action"]](**action["params"])
    assert "The episode ended after 8 step(s): solved. Total reward 1." in shown
    assert tools["wait"]() == shown  # the episode is over: nothing more is played
    assert env.get_reward() == 1.0


def test_each_rollout_has_its_own_worker_and_bad_arguments_are_the_environments_to_judge():
    envs = TRLEnvironments(CRATE_DOCK, split="val", max_levels=1)
    env = envs.environment_factory()
    assert env.get_reward() == 0.0 and "not reset" in env.move(direction="north")
    env.reset(**envs.rows[0])
    first = env._episode.client
    env.move(direction="up", speed=3)  # a model's arguments, as they came: one invalid step
    assert env._episode.tracker.validity.invalid == 1 and env._episode.tracker.turns == 1
    assert env.get_reward() == 0.0
    env.reset(**envs.rows[0])
    assert env._episode.client is not first and first.worker.proc.poll() is not None  # the last one was closed
    other = envs.environment_factory()
    other.reset(**envs.rows[0])
    assert other._episode.client.worker.proc.pid != env._episode.client.worker.proc.pid
    assert env.get_reward() == other.get_reward() == 0.0


def test_several_environments_are_routed_by_name_as_trl_routes_a_dict_factory():
    envs = TRLEnvironments(REFERENCE, max_levels=1)
    factory = envs.environment_factory
    assert sorted(factory) == ["crate_dock", "tide_pool"] == sorted({r["environment"] for r in envs.rows})
    assert factory["crate_dock"] is not factory["tide_pool"]


def test_an_action_trl_cannot_expose_is_refused_naming_it(tmp_path):
    import shutil

    env_dir = tmp_path / "crate_dock"
    shutil.copytree(CRATE_DOCK, env_dir)
    config = (env_dir / "config.yaml").read_text()
    (env_dir / "config.yaml").write_text(config.replace("name: wait", "name: reset", 1))
    (env_dir / "action_space.txt").write_text((env_dir / "action_space.txt").read_text().replace('"wait"', '"reset"'))
    with pytest.raises(UserError, match="action 'reset': expected a name TRL can expose as a tool"):
        TRLEnvironments(env_dir)


def test_transformers_reads_every_tool_as_trl_renders_it():
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed here (TRL renders tools with its get_json_schema)")
    from transformers.utils import get_json_schema

    env = TRLEnvironments(REFERENCE, max_levels=1).environment_factory["crate_dock"]()
    schema = get_json_schema(tools_of(env)["move"])["function"]
    assert schema["name"] == "move" and schema["parameters"]["required"] == ["direction"]
    assert schema["parameters"]["properties"]["direction"]["enum"] == ["north", "south", "east", "west"]
    assert get_json_schema(tools_of(env)["wait"])["function"]["parameters"]["properties"] == {}


def test_the_example_runs_offline_with_a_scripted_policy():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "trl_scripted.py"), str(REFERENCE),
                           "--max-levels", "2"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "4 rollout(s), mean reward 1.000"
    assert "crate_dock levels/level_01.yaml: witness policy, tools move, wait: reward 1.0" in lines


def test_train_dataset_is_the_rows_or_says_what_it_needs(monkeypatch):
    envs = TRLEnvironments(CRATE_DOCK, split="test", max_levels=2)
    if importlib.util.find_spec("datasets") is not None:
        assert envs.train_dataset.to_list() == envs.rows
    monkeypatch.setitem(sys.modules, "datasets", None)  # as where TRL (and so datasets) is not installed
    with pytest.raises(UserError, match=r"expected the `datasets` package \(TRL installs it\).*use `.rows`"):
        envs.train_dataset  # noqa: B018 (the property is what is tried)
