"""Parameter values from the level, not a fixed grid (issue 38 item 1): a search finds a solving
value the level stores (a gear ratio of 37.5), an amount it states (5,000, won in two steps),
a value only refinement reaches (halfway between two the level stores), and verify records the
value sets it tried."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.dsl_schema.actions import Action, Param
from envforge.pipeline.envfolder import evidence
from envforge.pipeline.envfolder.actions import NO_EVIDENCE, ActionSpace
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.envfolder.values import level_values, refine
from envforge.pipeline.planner import replay
from envforge.pipeline.sandbox.outside.client import EnvClient
from envforge.pipeline.testing.tiny_env import CONFIG, write_env

# Gears: `set_ratio(value)` wins (1.0, episode over) when the value is the level's target ratio, within
# 1e-6; any other value only says "slipped". The validator gives no max: only the search can.
GEARS = '''
from pipeline.runtime import SkinEnv


class Gears(SkinEnv):
    def transition(self, action):
        self._won = False
        value = (action.get("params") or {}).get("value")
        if action.get("action") == "set_ratio" and isinstance(value, (int, float)):
            self._state["ratio"] = value
            self._won = abs(value - self._state["target_ratio"]) < 1e-6
            self._last_action_result = "meshed" if self._won else "slipped"
        else:
            self._last_action_result = "use set_ratio with a number"
        return self._state

    def reward(self, action):
        return (1.0, ["meshed"], {}) if self._won else (0.0, [], {})

    def done(self, state=None):
        return self._won or self._t >= self.max_steps

    def render_skin(self, omega):
        return f"step {omega['t']}: ratio {self._state['ratio']}"
'''

GEARS_GENERATE = '''
def generate_level(seed, config):
    return {"target_ratio": 12.5 + 2.5 * (seed % 20), "ratio": 1.0, "low": 10, "high": 20}
'''

# Tuning: the target is halfway between the two gears the level stores, a number it does not hold.
TUNING = GEARS.replace('self._state["target_ratio"]', '(self._state["low"] + self._state["high"]) / 2')
TUNING_GENERATE = '''
def generate_level(seed, config):
    low = 10 + seed % 30
    return {"ratio": 1.0, "low": low, "high": low + 15}
'''

NO_MAX = '''
def validate_level(state):
    return (True, [])
'''

GEARS_CONFIG = {
    **CONFIG, "meta": {**CONFIG["meta"], "id": "gears", "name": "Gears", "description": "Mesh the gears."},
    "state_template": {"target_ratio": 37.5, "ratio": 1.0, "low": 10, "high": 20},
    "observation": {"policy": "full", "params": {}, "expose": ["target_ratio", "ratio", "t"]},
    "reward": {"events": [{"trigger": "meshed", "value": 1.0}]},
    "transition": {"actions": [{"name": "set_ratio", "description": "Set the gear ratio.",
                                "params": [{"name": "value", "type": "number", "range": [0.5, 100.0]}]}]},
    "termination": {"max_steps": 6, "conditions": []},
}

# Vault: `deposit(amount)` adds to the balance, `transfer(amount)` moves that much of it to the vault;
# a vault holding the level's `required` sum (5,000) wins 10.0 and ends the episode. Amounts are unbounded.
VAULT = '''
from pipeline.runtime import SkinEnv


class Vault(SkinEnv):
    def transition(self, action):
        self._won = False
        amount = (action.get("params") or {}).get("amount")
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            self._last_action_result = "amount must be a positive integer"
        elif action.get("action") == "deposit":
            self._state["balance"] += amount
            self._last_action_result = "deposited"
        elif action.get("action") == "transfer" and amount <= self._state["balance"]:
            self._state["balance"] -= amount
            self._state["vault"] += amount
            self._won = self._state["vault"] >= self._state["required"]
            self._last_action_result = "transferred"
        else:
            self._last_action_result = "insufficient balance"
        return self._state

    def reward(self, action):
        return (10.0, ["unlocked"], {}) if self._won else (0.0, [], {})

    def done(self, state=None):
        return self._won or self._t >= self.max_steps

    def render_skin(self, omega):
        return f"step {omega['t']}: balance {self._state['balance']}, vault {self._state['vault']}"
'''

VAULT_GENERATE = '''
def generate_level(seed, config):
    return {"balance": 0, "vault": 0, "required": 1000 * (3 + seed % 40)}
'''

VAULT_CONFIG = {
    **CONFIG, "meta": {**CONFIG["meta"], "id": "vault", "name": "Vault", "description": "Fill the vault."},
    "state_template": {"balance": 0, "vault": 0, "required": 5000},
    "observation": {"policy": "full", "params": {}, "expose": ["balance", "vault", "required", "t"]},
    "reward": {"events": [{"trigger": "unlocked", "value": 10.0}]},
    "transition": {"actions": [
        {"name": "deposit", "description": "Deposit credits.", "params": [{"name": "amount", "type": "integer"}]},
        {"name": "transfer", "description": "Move credits to the vault.",
         "params": [{"name": "amount", "type": "integer"}]}]},
    "termination": {"max_steps": 8, "conditions": []},
}


def gears_env(path: Path, main: str = GEARS, generate: str = GEARS_GENERATE, levels: dict | None = None) -> Path:
    config = GEARS_CONFIG if main == GEARS else {
        **GEARS_CONFIG, "state_template": {"ratio": 1.0, "low": 10, "high": 20},
        "observation": {"policy": "full", "params": {}, "expose": ["low", "high", "ratio", "t"]}}
    return write_env(path, replace={"env_main.py": main, "env_generate.py": generate, "env_validator.py": NO_MAX},
                     config=config, levels=levels or {
                         "levels/level_01.yaml": {"target_ratio": 37.5, "ratio": 1.0, "low": 10, "high": 20},
                         "levels/level_02.yaml": {"target_ratio": 61.25, "ratio": 1.0, "low": 10, "high": 20}})


def vault_env(path: Path) -> Path:
    return write_env(path, replace={"env_main.py": VAULT, "env_generate.py": VAULT_GENERATE,
                                    "env_validator.py": NO_MAX}, config=VAULT_CONFIG, levels={
        "levels/level_01.yaml": {"balance": 0, "vault": 0, "required": 5000},
        "levels/level_02.yaml": {"balance": 0, "vault": 0, "required": 7000}})


def verify(env: Path) -> tuple[subprocess.CompletedProcess, dict, dict]:
    """verify's levels stage: the process, the levels figures with the reason, the maxima written."""
    proc = envforge("verify", env, "--stages", "levels", "--write")
    report = json.loads((env / "verification.json").read_text())
    maxima = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    return proc, {**report["stages"]["levels"], "reason": report["reason"]}, maxima


def replays(env: Path, level: str, witness: list[dict]) -> float:
    """What the witness scores played from a fresh reset through ordinary steps."""
    spec = EnvSpec.open(env)
    with EnvClient.open(spec) as client:
        client.reset(level)
        total, _, _ = replay(client, witness)
    return total


def test_the_levels_values_come_first_from_its_domain_then_its_state_and_scales():
    space = ActionSpace.from_config({"transition": {"actions": GEARS_CONFIG["transition"]["actions"]
                                                    + VAULT_CONFIG["transition"]["actions"]}})
    values = level_values(space, {"target_ratio": 37.5, "ratio": 1.0, "required": 5000, "name": "gear box"})
    assert values["set_ratio", "value"][:3] == [0.5, 50.25, 100.0]  # the range's ends and middle first
    assert 37.5 in values["set_ratio", "value"] and 10 in values["set_ratio", "value"]
    assert 5000 in values["deposit", "amount"] and 10000 in values["deposit", "amount"]  # stated, and scaled
    assert all(isinstance(v, int) for v in values["deposit", "amount"])  # an integer parameter: no 37.5
    assert space.sources["deposit", "amount"] == NO_EVIDENCE
    # A whole domain (an enum) is left as it is.
    whole = ActionSpace.from_config({"transition": {"actions": [{"name": "go", "params": [
        {"name": "d", "type": "string", "enum": ["left", "right"]}]}]}})
    assert level_values(whole, {"x": 3, "y": "up"}) == {("go", "d"): ["left", "right"]}


def test_refinement_adds_the_neighbours_of_what_the_witness_used_or_bisects_the_grid():
    space = ActionSpace((Action("set", "Set v.", (Param("v", type="number", range=(0.0, 100.0)),)),), {})
    values = {("set", "v"): [0.0, 30.0, 45.0, 100.0]}
    near = refine(space, values, [{"action": "set", "params": {"v": 30.0}}])
    assert near["set", "v"] == [0.0, 30.0, 45.0, 100.0, 15.0, 37.5, 27.0, 33.0]
    assert refine(space, values, [])["set", "v"] == [0.0, 30.0, 45.0, 100.0, 15.0, 37.5, 72.5]
    assert refine(space, values, [])["set", "v"] == refine(space, values, [])["set", "v"]  # deterministic


def test_a_direction_documented_as_minus_one_zero_or_one_is_read():
    found = evidence.from_texts("direction", [("action_space.txt", "move(direction): direction (-1, 0, or 1)")])
    assert found is not None and found.values == (-1, 0, 1)


@pytest.mark.slow  # verify runs: seconds
def test_verify_proves_a_ratio_the_level_stores_and_the_witness_replays(tmp_path):
    """Before: the range's ends and middle (0.5, 50.25, 100) never mesh, every max is unknown and
    verify rejects; now the level's 37.5 is tried, the DSL's binary 1.0 is met: exact."""
    env = gears_env(tmp_path / "gears")
    proc, levels, maxima = verify(env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    entry = maxima["level_01.yaml"]
    assert (entry["max_reward"], entry["exact"], entry["proof"]) == (1.0, True, "upper_bound")
    assert entry["witness"] == [{"action": "set_ratio", "params": {"value": 37.5}}]
    assert replays(env, "levels/level_01.yaml", entry["witness"]) == 1.0
    assert maxima["level_02.yaml"]["witness"] == [{"action": "set_ratio", "params": {"value": 61.25}}]
    tried = levels["parameter_values"]["level_01.yaml"]["set_ratio.value"]["values"]
    assert tried[:3] == [0.5, 50.25, 100.0] and 37.5 in tried
    assert not levels.get("unknown_maxima") and levels["exact_levels"]


@pytest.mark.slow
def test_verify_finds_a_two_step_win_with_an_amount_the_level_states(tmp_path):
    env = vault_env(tmp_path / "vault")
    proc, levels, maxima = verify(env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    entry = maxima["level_01.yaml"]
    assert (entry["max_reward"], entry["exact"]) == (10.0, True)
    assert len(entry["witness"]) == 2 and [s["action"] for s in entry["witness"]] == ["deposit", "transfer"]
    assert all(s["params"]["amount"] >= 5000 for s in entry["witness"])
    assert replays(env, "levels/level_01.yaml", entry["witness"]) == 10.0
    assert maxima["level_02.yaml"]["max_reward"] == 10.0
    assert 5000 in levels["parameter_values"]["level_01.yaml"]["deposit.amount"]["values"]
    assert not levels.get("unknown_maxima")


@pytest.mark.slow
def test_verify_reaches_a_ratio_only_refinement_tries_and_records_it(tmp_path):
    """The target is halfway between the two gears the level stores (30 and 45): no value drawn from
    the level meshes, the bisected grid's 37.5 does, in the refined pass, within the same budget."""
    assert TUNING != GEARS
    env = gears_env(tmp_path / "tuning", TUNING, TUNING_GENERATE,
                    {"levels/level_01.yaml": {"ratio": 1.0, "low": 30, "high": 45}})
    proc, levels, maxima = verify(env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    entry = maxima["level_01.yaml"]
    assert (entry["max_reward"], entry["exact"]) == (1.0, True)
    assert entry["witness"] == [{"action": "set_ratio", "params": {"value": 37.5}}]
    assert replays(env, "levels/level_01.yaml", entry["witness"]) == 1.0
    tried = levels["parameter_values"]["level_01.yaml"]["set_ratio.value"]
    assert 37.5 in tried["refined"] and 37.5 not in tried["values"][:len(tried["values"]) - len(tried["refined"])]
    assert entry["search_nodes"] <= levels["search_budget"]["nodes_per_level"]
