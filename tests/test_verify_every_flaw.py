"""Every flaw named (issue 38 item 4): a rejection lists what every stage found. A stage that rejects
on the env's own opinion (its validator) still hands on the levels a replayed witness scores on, and
reliability's controls run on them, so the real flaw is said too."""
from __future__ import annotations

import json

from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import CONFIG, write_env

# A parameterless action charges a beacon: five of them in a row reach the objective on every level,
# whichever side of the start its goal lies (repeating one move does not).
ADVANCE = ('        if name == "move" and params.get("direction") in ("left", "right"):\n',
           '        if name == "charge":\n'
           '            self._state["charge"] = self._state.get("charge", 0) + 1\n'
           '            self._last_action_result = "charged"\n'
           '        elif name == "move" and params.get("direction") in ("left", "right"):\n')
OBJECTIVE = '(self._state["pos"] == self._state["goal"] or self._state.get("charge", 0) >= 5)'
REJECTS_ALL = '''
def validate_level(state):
    return (False, ["dense rewards might exceed success rewards"])


def max_reward(state):
    return 1.0
'''
BOTH_SIDES = {"levels/level_01.yaml": {"pos": 0, "goal": 5, "length": 6},
              "levels/level_02.yaml": {"pos": 7, "goal": 0, "length": 8},
              "val_levels/level_03.yaml": {"pos": 0, "goal": 6, "length": 7}}


def _main_with_charge() -> tuple:
    """env_main.py's source with the charge action and the objective it reaches."""
    from envforge.pipeline.testing.tiny_env import ENV_MAIN
    source = ENV_MAIN.replace(*ADVANCE)
    source = source.replace('reached = self._state["pos"] == self._state["goal"]', f"reached = {OBJECTIVE}")
    source = source.replace('return self._state["pos"] == self._state["goal"] or', f"return {OBJECTIVE} or")
    assert source.count(OBJECTIVE) == 2
    return source


def test_a_validator_rejecting_everything_does_not_hide_a_parameterless_action_spam_reaching_the_goal(tmp_path):
    config = json.loads(json.dumps(CONFIG))
    config["transition"]["actions"].append({"name": "charge", "description": "Charge the beacon.", "params": []})
    env = write_env(tmp_path / "e", replace={"env_main.py": _main_with_charge(), "env_validator.py": REJECTS_ALL},
                    config=config, levels=BOTH_SIDES)
    done = envforge("verify", env, "--json", "--write")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["stage"] == "levels"
    assert report["cause"]["kind"] == "validator_rejects_all"  # the first stage's verdict stands ...
    reason = report["reason"]
    assert reason.startswith("env_validator.py: expected the validator to accept some generated levels")
    # ... and reliability, run on the three shipped levels the search's witnesses refute it on, names the spam
    assert "; also found: reliability, on the 3 level(s) that can be played: reward: expected a reward that pays " \
           "for skill, found that repeating charge until the episode ends scores 1.00 of the max" in reason
    figures = report["stages"]["reliability"]
    assert figures["best_constant_policy"] == {"policy": "repeating charge", "normalized": 1.0}
    assert sorted(figures["per_level"]) == ["level_01.yaml", "level_02.yaml", "level_03.yaml"]
    # What reliability ran on the playable levels is only named: the levels stage's record keeps every level
    written = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    assert sorted(written) == ["level_01.yaml", "level_02.yaml", "level_03.yaml"]
