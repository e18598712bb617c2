"""EventEnv ends episodes from config.yaml's termination.conditions: an env that writes no done()
terminates when a condition holds and is truncated at the runtime's cap otherwise, seen through the
sandbox client; a malformed condition fails the load with a located error naming config.yaml."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sandbox_kit import LIMITS

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient

RIGHT = {"action": "move", "params": {}}
GIVE_UP = {"action": "give_up", "params": {}}

# No done(): the episode's end comes from config.yaml alone.
STEPPER = '''
from pipeline.runtime import EventEnv


def apply_action(state, action):
    if action.get("action") == "give_up":
        return dict(state), [], "gave up"
    state = {**state, "pos": state["pos"] + 1}
    return state, ["goal"] if state["pos"] == state["goal"] else [], "moved"


class Stepper(EventEnv):
    rules = staticmethod(apply_action)
'''

OWN_DONE = STEPPER + '''
    def done(self, state=None):
        return self._state["pos"] == 1
'''


def stepper(tmp_path: Path, conditions, source: str = STEPPER, max_steps: int = 6) -> Path:
    env_dir = tmp_path / "stepper"
    (env_dir / "levels").mkdir(parents=True)
    (env_dir / "env_main.py").write_text(source.lstrip())
    config = {"reward": {"events": [{"trigger": "goal", "value": 1.0}]},
              "termination": {"max_steps": max_steps, "conditions": conditions}}
    (env_dir / "config.yaml").write_text(yaml.safe_dump(config))
    (env_dir / "levels" / "near.yaml").write_text("pos: 0\ngoal: 3\n")
    (env_dir / "levels" / "far.yaml").write_text("pos: 0\ngoal: 99\n")
    return env_dir


def play(env_dir: Path, level: str, actions: list[dict], max_steps: int = 6) -> list:
    with EnvClient.open(EnvSpec.open(env_dir), LIMITS, max_steps=max_steps) as env:
        env.reset(f"levels/{level}.yaml")
        results = []
        for action in actions:
            results.append(env.step(action))
            if results[-1].done:
                break
        return results


def ends(results: list) -> list[tuple[int | None, bool, bool]]:
    return [(r.t, r.terminated, r.truncated) for r in results]


def test_a_condition_that_holds_terminates_an_env_without_done(tmp_path):
    env_dir = stepper(tmp_path, ["pos >= goal"])
    results = play(env_dir, "near", [RIGHT] * 10)
    assert ends(results) == [(1, False, False), (2, False, False), (3, True, False)]
    assert results[-1].reward == 1.0


def test_without_a_holding_condition_the_episode_runs_to_the_cap_and_is_truncated(tmp_path):
    env_dir = stepper(tmp_path, ["pos >= goal"])
    results = play(env_dir, "far", [RIGHT] * 10)
    assert ends(results) == [(t, False, False) for t in range(1, 6)] + [(6, False, True)]


def test_no_conditions_at_all_runs_to_the_cap(tmp_path):
    results = play(stepper(tmp_path, None), "near", [RIGHT] * 10)
    assert ends(results)[-1] == (6, False, True) and len(results) == 6


def test_conditions_read_reserved_names_and_any_one_ends_the_episode(tmp_path):
    env_dir = stepper(tmp_path, ["pos >= goal", "last_action_result == 'gave up' and t >= 2"])
    assert ends(play(env_dir, "far", [GIVE_UP, GIVE_UP])) == [(1, False, False), (2, True, False)]
    env_dir = stepper(tmp_path / "b", ["remaining_steps == 2"])
    assert ends(play(env_dir, "far", [RIGHT] * 10))[-1] == (4, True, False)


def test_an_env_with_its_own_done_keeps_it(tmp_path):
    env_dir = stepper(tmp_path, ["pos >= goal"], source=OWN_DONE)
    assert ends(play(env_dir, "near", [RIGHT] * 10)) == [(1, True, False)]


@pytest.mark.parametrize("conditions, found", [
    (["pos >= "], "found 'pos >= ' (invalid syntax"),
    (["pos >= goal", "__import__('os').system('x')"], "a function call (only len(...) is allowed)"),
    ([7], "found integer"),
    ("pos >= goal", "termination.conditions: expected a list of conditions, found string"),
])
def test_a_malformed_condition_fails_the_load_naming_config_yaml(tmp_path, conditions, found):
    env_dir = stepper(tmp_path, conditions)
    with pytest.raises(SandboxFailure) as caught:
        play(env_dir, "near", [RIGHT])
    assert caught.value.kind == "load"
    assert "config.yaml: termination.conditions" in caught.value.detail
    assert found in caught.value.detail
    if isinstance(conditions, list):
        bad = len(conditions) - 1
        assert (
            f"config.yaml: termination.conditions[{bad}]: expected a condition in the DSL syntax" in caught.value.detail
        )


def test_a_condition_the_state_cannot_answer_is_a_located_failure_of_the_step(tmp_path):
    env_dir = stepper(tmp_path, ["game.over == true"])
    with pytest.raises(SandboxFailure) as caught:
        play(env_dir, "near", [RIGHT])
    assert caught.value.kind == "exception"
    assert "config.yaml: termination.conditions[0]: expected a condition the state can answer" in caught.value.detail
    assert "'game' is not in the state" in caught.value.detail
