"""The DSL's reward bound (pipeline/planner.py reward_bound) in the one search: an admissible
reward-to-go bound checked against every step the search takes. It prunes branches that cannot
beat the best (branch and bound), stops the search when met, gives a lower bound its gap, and is
dropped, with the step that broke it named, when the environment pays what its DSL does not declare.
Seen as a user sees it: the verdict line, verification.json's levels figures, level_max_rewards.json."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.levelmax import evidence_bound
from envforge.pipeline.planner import reward_bound, search
from envforge.pipeline.sandbox.outside.client import EnvClient
from envforge.pipeline.testing.tiny_env import CONFIG, write_env

pytestmark = pytest.mark.slow  # a verify a test: seconds

# Coins: `take` pays 1.0 per coin left; `wait` stirs a counter (so the states do not repeat). A level
# with `split: true` pays 1.5 for its last coin, a value the DSL does not declare.
COINS = '''
from pipeline.runtime import SkinEnv


class Coins(SkinEnv):
    def transition(self, action):
        self._paid = 0.0
        if action.get("action") == "take" and self._state["coins"] > 0:
            self._state["coins"] -= 1
            last = self._state["coins"] == 0 and self._state.get("split")
            self._paid = 1.5 if last else 1.0
            self._last_action_result = "took a coin"
        else:
            self._state["noise"] = (self._state["noise"] * 7 + 3) % 1009
            self._last_action_result = "waited"
        return self._state

    def reward(self, action):
        return (self._paid, ["coin"], {}) if self._paid else (0.0, [], {})

    def done(self, state=None):
        return self._t >= self.max_steps

    def render_skin(self, omega):
        return f"step {omega['t']}: {self._state['coins']} coins"
'''

GENERATE = '''
def generate_level(seed, config):
    return {"coins": 1 + seed % 3, "noise": seed, "split": False}
'''

VALIDATE = '''
def validate_level(state):
    return (state.get("coins", 0) > 0, [] if state.get("coins", 0) > 0 else ["no coins"])
'''

CONFIG_COINS = {
    **CONFIG, "meta": {**CONFIG["meta"], "id": "coins", "name": "Coins"},
    "state_template": {"coins": 3, "noise": 0, "split": False},
    "observation": {"policy": "full", "params": {}, "expose": ["coins", "t"]},
    # coin 1.0 and a tip of 0.5 that never pays: two positive values, so no binary bound: 1.0 a step
    "reward": {"events": [{"trigger": "coin", "value": 1.0}, {"trigger": "tip", "value": 0.5}]},
    "transition": {"actions": [{"name": "take", "description": "Take a coin.", "params": []},
                               {"name": "wait", "description": "Wait.", "params": []}]},
    "termination": {"max_steps": 4, "conditions": []},
}

LEVELS = {"levels/level_01.yaml": {"coins": 3, "noise": 0, "split": False},
          "levels/level_02.yaml": {"coins": 2, "noise": 5, "split": True}}


def coins_env(path: Path) -> Path:
    return write_env(path, replace={"env_main.py": COINS, "env_generate.py": GENERATE, "env_validator.py": VALIDATE},
                     config=CONFIG_COINS, levels=LEVELS)


def verify(env: Path, *flags: str) -> tuple[subprocess.CompletedProcess, dict, dict]:
    """verify's levels stage: the process, verification.json (levels figures and its reason), the maxima."""
    proc = envforge("verify", env, "--stages", "levels", "--write", *flags)
    report = json.loads((env / "verification.json").read_text())
    maxima = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    return proc, {**report["stages"]["levels"], "reason": report["reason"]}, maxima


def test_the_dsl_bound_is_each_steps_largest_declared_reward_over_the_step_cap():
    assert reward_bound(CONFIG_COINS) == {"values": [0.5, 1.0], "step": 1.0, "once": False}
    assert reward_bound(CONFIG) == {"values": [1.0], "step": 1.0, "once": True}  # binary: paid once
    assert reward_bound({"reward": {"events": [{"trigger": "x", "value": -1.0}]}}) is None


def test_the_evidence_bound_is_one_paying_step_when_every_paying_step_ended_the_episode():
    """4_MagneticField's case: its DSL's 1.0 is refuted by a 0.3, but every paying step (a submit) ended
    the episode and paid at most 1.2: the evidence suggests 1.2, labelled as no proof."""
    seen = [{"step_max": 1.2, "paying_steps_end": True, "steps": 20_000}, None]
    assert evidence_bound(seen, 40, 1.2) == (1.2, "the evidence suggests at most 1.2 (every paying step of the "
                                                  "20,000 the search took ended the episode and paid at most 1.2; "
                                                  "not a proof)")
    went_on = [{"step_max": 1.0, "paying_steps_end": False, "steps": 10}, {"step_max": 0.5, "paying_steps_end": True,
                                                                           "steps": 5}]
    assert evidence_bound(went_on, 40, 8.0)[0] == 40.0
    assert evidence_bound([{"step_max": 0.0, "paying_steps_end": True, "steps": 9}], 40, 0.0) == (None, "")


def test_branch_and_bound_prunes_what_cannot_beat_the_best_and_still_proves_the_max(tmp_path):
    """Breadth-first with the step in the key over 4 steps: after 3 coins the bound (1.0 a step left)
    shows every branch that waited cannot beat 3, so they are pruned, and the space is still exhausted."""
    env = coins_env(tmp_path / "coins")
    spec = EnvSpec.open(env)
    with EnvClient.open(spec) as client:
        client.reset("levels/level_01.yaml")
        full = search(client, spec, max_nodes=10_000, seconds=60, order="breadth", time_in_key=True, bound=False)
        client.reset("levels/level_01.yaml")
        pruned = search(client, spec, max_nodes=10_000, seconds=60, order="breadth", time_in_key=True)
        client.reset("levels/level_01.yaml")
        floored = search(client, spec, max_nodes=10_000, seconds=60, order="breadth", time_in_key=True, floor=3.0)
    assert (full.best_reward, full.proof, full.pruned) == (3.0, "exhausted", 0)
    assert (pruned.best_reward, pruned.proof, pruned.upper_bound) == (3.0, "exhausted", 4.0)
    assert pruned.pruned > 0 and pruned.nodes < full.nodes
    # A floor already reached (verify's best-first pass) prunes from the start.
    assert floored.proof == "exhausted" and floored.nodes < pruned.nodes


def test_a_step_paying_an_undeclared_value_refutes_the_bound_and_voids_what_it_pruned(tmp_path):
    """Three coins, the last paying 1.5: by depth 2 the bound (1.0 a step) prunes waiting twice, which
    cannot beat 2; the third coin's 1.5 then refutes it, so the exhausted space proves nothing."""
    env = coins_env(tmp_path / "coins")
    (env / "levels" / "level_03.yaml").write_text("coins: 3\nnoise: 1\nsplit: true\n")
    spec = EnvSpec.open(env)
    with EnvClient.open(spec) as client:
        client.reset("levels/level_03.yaml")
        found = search(client, spec, max_nodes=10_000, seconds=60, order="breadth", time_in_key=True)
        client.reset("levels/level_03.yaml")
        unbounded = search(client, spec, max_nodes=10_000, seconds=60, order="breadth", time_in_key=True,
                           bound=False)
    assert found.best_reward == unbounded.best_reward == 3.5 and found.upper_bound is None
    assert found.bound_refuted.startswith("a step paid 1.5, none of the declared reward values [0.5, 1.0] (after [")
    assert found.pruned > 0 and (found.exhausted, found.proof, found.stopped) == (False, None, "bound_refuted")
    assert (unbounded.exhausted, unbounded.proof) == (True, "exhausted")


def test_verify_names_the_gap_to_the_dsl_bound_and_why_a_level_has_no_upper_bound(tmp_path):
    """A budget too small to exhaust: level_01's 3 is a lower bound, 1 below the DSL's bound (4 steps
    x 1.0); level_02 pays an undeclared 1.5, so it has no upper bound, and the verdict says why."""
    env = coins_env(tmp_path / "coins")
    proc, levels, maxima = verify(env, "--search-nodes", "8")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert levels["gaps"]["level_01.yaml"] == 1.0
    assert maxima["level_01.yaml"]["max_reward"] == 3.0 and maxima["level_01.yaml"]["upper_bound"] == 4.0
    assert maxima["level_01.yaml"]["exact"] is False and "gap 1" in maxima["level_01.yaml"]["notes"]
    assert "level_02.yaml" not in levels["gaps"]
    why = levels["no_upper_bound"]["level_02.yaml"]
    assert why.startswith("the DSL's reward bound is refuted: a step paid 1.5, none of the declared reward values")
    assert maxima["level_02.yaml"]["upper_bound"] is None and maxima["level_02.yaml"]["bound_refuted"]
    # What the steps suggest instead, labelled a hypothesis: 1.5 at most a step, over 4 steps.
    assert maxima["level_02.yaml"]["evidence_bound"] == 6.0 and maxima["level_02.yaml"]["exact"] is False
    assert "; the evidence suggests at most 6 (the " in why
    assert why.endswith("paid at most 1.5 each, over 4 steps; not a proof)")
    assert maxima["level_01.yaml"]["evidence_bound"] is None  # it has the DSL's bound
    line = next(line for line in proc.stdout.splitlines() if line.startswith("levels:"))
    assert "only a lower bound (search budget spent: gap to the DSL's reward bound at most 1 on 1; no upper " \
           "bound on 1: the DSL's reward bound is refuted: a step paid 1.5" in line
    assert levels["reason"].startswith("accepted: levels passed (2 max reward(s) are lower bounds (the search was "
                                       "not exhaustive): gap to the DSL's reward bound at most 1 on 1; no upper "
                                       "bound on 1: the DSL's reward bound is refuted: a step paid 1.5")


def test_verify_proves_a_max_by_exhausting_the_space_with_pruning_and_says_so(tmp_path):
    env = coins_env(tmp_path / "coins")
    proc, levels, maxima = verify(env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    entry = maxima["level_01.yaml"]
    assert (entry["max_reward"], entry["exact"], entry["proof"]) == (3.0, True, "exhausted")
    assert "or pruned as unable to beat the best by the DSL's reward bound" in entry["notes"]
    assert "level_01.yaml" in levels["exact_levels"] and levels["gaps"] == {}


# Jackpot: `take` ends the episode paying 1.0, or 3.0 (a value its DSL does not declare) after two waits.
JACKPOT = '''
from pipeline.runtime import SkinEnv


class Jackpot(SkinEnv):
    def transition(self, action):
        self._paid = 0.0
        if action.get("action") == "take":
            self._paid = 3.0 if self._state["waits"] >= 2 else 1.0
            self._state["taken"] = True
        else:
            self._state["waits"] += 1
        self._last_action_result = "ok"
        return self._state

    def reward(self, action):
        return (self._paid, ["jackpot"], {}) if self._paid else (0.0, [], {})

    def done(self, state=None):
        return self._state["taken"] or self._t >= self.max_steps

    def render_skin(self, omega):
        return f"step {omega['t']}"
'''


def test_an_episode_scoring_above_a_proved_max_clears_the_proof_and_refutes_the_bound(tmp_path):
    """The DSL declares a binary 1.0 and the first `take` meets it, so the search stops there with a
    proof; a random episode that waits twice scores 3.0. The level is then no longer exact, and the
    bound is named refuted by that episode."""
    config = {**CONFIG_COINS, "reward": {"events": [{"trigger": "jackpot", "value": 1.0}]},
              "state_template": {"waits": 0, "taken": False},
              "observation": {"policy": "full", "params": {}, "expose": ["waits", "t"]}}
    env = write_env(tmp_path / "jackpot", replace={
        "env_main.py": JACKPOT, "env_validator.py": "def validate_level(state):\n    return (True, [])\n",
        "env_generate.py": "def generate_level(seed, config):\n    return {'waits': 0, 'taken': False, 'id': seed}\n"},
        config=config, levels={"levels/level_01.yaml": {"waits": 0, "taken": False}})
    envforge("verify", env, "--stages", "levels,reliability", "--random-episodes", "12", "--write")
    entry = json.loads((env / "level_max_rewards.json").read_text())["levels"]["level_01.yaml"]
    assert entry["max_reward"] == 3.0 and entry["exact"] is False and entry["upper_bound"] is None
    assert entry["bound_refuted"].startswith("a random episode scored 3, above the upper bound 1")


def test_a_claim_above_the_dsls_bound_is_unreachable_and_one_within_it_unconfirmed(tmp_path):
    """level_01's search is cut at 3 (a lower bound; the DSL's bound is 4): a shipped claim of 5 is above
    the bound, so no action sequence reaches it; level_02 has no bound, so its claim stays unconfirmed."""
    env = coins_env(tmp_path / "coins")
    claims = {"levels": {"level_01.yaml": {"max_reward": 5.0}, "level_02.yaml": {"max_reward": 9.0}}}
    (env / "level_max_rewards.json").write_text(json.dumps(claims))
    proc = envforge("verify", env, "--stages", "levels", "--search-nodes", "8", "--json")
    compared = json.loads(proc.stdout)["stages"]["levels"]["claims"]
    assert compared["level_01.yaml"]["status"] == "unreachable"
    assert compared["level_01.yaml"]["why"] == "the DSL's reward bound is 4"
    # level_02 broke the bound (it paid 1.5): no bound, so its claim of 9 is only unconfirmed.
    assert compared["level_02.yaml"]["status"] == "unconfirmed" and "why" not in compared["level_02.yaml"]
    text = envforge("verify", env, "--stages", "levels", "--search-nodes", "8").stdout
    line = next(x for x in text.splitlines() if x.startswith("claimed max rewards"))
    assert "1 unconfirmed, 1 unreachable; flagged: level_01.yaml claims 5, the DSL's reward bound is 4" in line


def test_a_search_that_stops_at_a_claim_it_reaches_says_that_is_no_proof(tmp_path):
    env = coins_env(tmp_path / "coins")
    (env / "level_max_rewards.json").write_text(json.dumps({"levels": {"level_02.yaml": {"max_reward": 2.5}}}))
    proc, levels, maxima = verify(env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    entry = maxima["level_02.yaml"]
    assert (entry["max_reward"], entry["exact"], entry["certainty"]) == (2.5, False, "lower_bound")
    assert "(a lower bound: the search stopped on reaching the claimed max, which proves nothing)" in entry["notes"]
    # The claim is reached, not confirmed (nothing proves more is impossible), and the summary says why
    # the search ended short of a proof: not its budget.
    assert levels["stopped_at_claim"] == ["level_02.yaml"]
    assert levels["claims"]["level_02.yaml"]["status"] == "reached"
    line = next(line for line in proc.stdout.splitlines() if line.startswith("levels:"))
    assert "the search stopped on reaching the validator's or shipped claim, which proves nothing" in line
