"""Validators and generators in the shapes environments written elsewhere use (AutoEnv-36)."""
from __future__ import annotations

import subprocess

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env

CHECK = "0 < state.get(\"goal\", -1) < state.get(\"length\", 0)"
LOAD = "import yaml\n\n\ndef _load(path):\n    with open(path) as f:\n        return yaml.safe_load(f)\n\n\n"

SHAPES = {
    "class_built_with_the_config": (
        "class V:\n    def __init__(self, config):\n        self.length_key = config['state_template'] and 'length'\n\n"
        "    def validate_level(self, world_state):\n        state = world_state\n"
        f"        ok = {CHECK.replace('length', 'length')}\n        return ok, [] if ok else ['goal outside']\n"
    ),
    "level_file_path_and_three_values": (
        LOAD + "class V:\n    def validate_level(self, level_path: str):\n        state = _load(level_path)\n"
        f"        ok = {CHECK}\n        return ok, [] if ok else ['goal outside'], ['a warning']\n"
    ),
    "world_id_and_a_dict": (
        LOAD + "class V:\n    def validate_level(self, world_id: str):\n"
        "        state = _load(f'./levels/{world_id}.yaml')\n"
        f"        ok = {CHECK}\n        return {{'is_valid': ok, 'errors': [] if ok else ['goal outside']}}\n"
    ),
    "validate_world_and_a_result_object": (
        LOAD
        + "class R:\n    def __init__(self, ok):\n        self.is_valid, self.issues = ok, [] if ok else ['goal"
          " outside']\n\n\n"
        "class V:\n    def validate_world(self, world_path):\n        state = _load(world_path)\n"
        f"        return R({CHECK})\n"
    ),
}


def check(env) -> subprocess.CompletedProcess:
    return envforge("check", str(env))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_check_accepts_validator_in_each_shape(tmp_path, shape):
    env = write_env(tmp_path / shape, replace={"env_validator.py": SHAPES[shape]})
    result = check(env)
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().splitlines()[-1].startswith("ok: ")


@pytest.mark.parametrize("shape", ["world_id_and_a_dict", "level_file_path_and_three_values"])
def test_validator_in_another_shape_still_rejects_a_bad_shipped_level(tmp_path, shape):
    env = write_env(tmp_path / shape, replace={"env_validator.py": SHAPES[shape]},
                    levels={"levels/level_01.yaml": {"pos": 0, "goal": 9, "length": 6}})
    result = check(env)
    assert result.returncode == 1
    assert "levels/level_01.yaml: expected the validator to accept this shipped level, found goal outside" \
        in result.stdout, result.stdout


def test_validator_that_fits_no_shape_is_named_with_the_shapes_tried(tmp_path):
    env = write_env(tmp_path / "odd", replace={"env_validator.py": "def looks_fine(state):\n    return 'yes'\n"})
    result = check(env)
    assert result.returncode == 1
    line = next(x for x in result.stdout.splitlines() if "expected validate_level or validate_world" in x)
    assert line.startswith("env_validator.py: ")
    assert "given a state, a level file path or a world id" in line and "looks_fine" in line


def test_validator_answer_in_no_known_shape_names_the_function(tmp_path):
    env = write_env(tmp_path / "odd", replace={"env_validator.py": "def validate_level(state):\n    return 'fine'\n"})
    result = check(env)
    assert "env_validator.py: expected the validator to run on levels/level_01.yaml, found interface: " \
           "env_validator.py: validate_level: expected validate_level or validate_world" in result.stdout, result.stdout
    assert "found 'fine'" in result.stdout


def test_generator_whose_world_id_names_no_file_is_blamed(tmp_path):
    env_main = (
        "import yaml\nfrom base.env.base_env import SkinEnv\n"
        "from env_generate import Gen\n\n\nclass Env(SkinEnv):\n"
        "    def _generate_world(self, seed=None):\n        return Gen(self.env_id, self.configs).generate(seed)\n\n"
        "    def _load_world(self, world_id):\n        with open(f'./levels/{world_id}.yaml') as f:\n"
        "            return yaml.safe_load(f)\n\n"
        "    def transition(self, action):\n        return self._state\n\n"
        "    def reward(self, action):\n        return 0.0, [], {}\n"
    )
    generator = ("import os\nimport yaml\nfrom base.env.base_generator import WorldGenerator\n\n\n"
                 "class Gen(WorldGenerator):\n    def generate(self, seed=None, save_path=None):\n"
                 "        os.makedirs('./levels', exist_ok=True)\n"
                 "        with open(f'./levels/world_{seed}.yaml', 'w') as f:\n"
                 "            yaml.safe_dump({'pos': 0, 'goal': 2, 'length': 5 + seed}, f)\n"
                 "        return str(seed)\n")
    env = write_env(tmp_path / "gen", replace={"env_main.py": env_main, "env_generate.py": generator})
    result = check(env)
    assert (
        "env_generate.py:7: expected the generator to make a level for seed 1, found exception: Gen.generate(seed=1) "
        "returned the world id '1', but levels/1.yaml does not exist: it wrote levels/world_1.yaml"
    ) in result.stdout, result.stdout
