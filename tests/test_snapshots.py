"""Snapshots that share an environment's past states (pipeline/sandbox/inside/snapshots.py): a restore
hands back the unchanged items of its lists instead of unpickling them again, and never hands back
one the environment changed in place or one something else points into."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml

from envforge.pipeline.sandbox.inside.snapshots import Store
from envforge.pipeline.sandbox.outside.client import EnvClient


def state(n: int) -> dict:
    return {"agent": {"pos": [n, n + 1], "gold": n * 1.5}, "t": n, "seen": [n * 1000 + i for i in range(40)]}


class Box:  # compared by identity: a change inside it could not be seen
    pass


def test_a_restore_shares_the_unchanged_past_states_and_gives_a_new_list_around_them():
    store = Store()
    history = [state(0), state(1)]
    first = store.dumps({"_history": history, "_state": state(2)})
    history.append(state(2))
    second = store.dumps({"_history": history, "_state": state(3)})
    assert len(second) < len(pickle.dumps({"_history": history, "_state": state(3)})) / 2
    restored = store.loads(second)
    assert restored["_history"] == history and restored["_history"] is not history
    assert all(a is b for a, b in zip(restored["_history"], history))  # the same objects, not copies
    restored["_history"].append(state(9))  # appending touches no snapshot
    assert store.loads(first)["_history"] == [state(0), state(1)]
    assert store.sharing


def test_a_shared_state_changed_in_place_is_never_handed_back_changed():
    store = Store()
    history = [state(0), state(1)]
    snap = store.dumps({"_history": history})
    restored = store.loads(snap)
    restored["_history"][0]["agent"]["gold"] = 99.0  # the environment rewrites a past state
    again = store.loads(snap)
    assert again["_history"] == [state(0), state(1)]  # what it held when the snapshot was taken
    assert not store.sharing and "changed a shared object in place" in store.stopped
    later = store.dumps({"_history": again["_history"] + [state(5)]})
    assert store.loads(later)["_history"] == [state(0), state(1), state(5)]
    restored["_history"][1]["t"] = -1  # handed out before sharing stopped: later restores still get copies
    assert store.loads(snap)["_history"] == [state(0), state(1)]


def test_an_attribute_pointing_into_a_shared_state_keeps_pointing_into_it_after_a_restore():
    store = Store()
    history = [state(0), state(1)]
    store.dumps({"_history": history})
    snap = store.dumps({"_history": history, "_last": history[1]["agent"]})  # an alias into a past state
    assert not store.sharing and "points into a shared object" in store.stopped
    restored = store.loads(snap)
    assert restored["_last"] is restored["_history"][1]["agent"]  # one object, as the environment held it


def test_what_could_change_unseen_is_not_shared():
    store = Store()
    history = [{"box": Box()}, {"x": float("nan")}, {"ok": [1, 2]}]
    snap = store.dumps({"_history": history})
    restored = store.loads(snap)
    assert restored["_history"][0] is not history[0]
    assert restored["_history"][1] is history[1] and restored["_history"][2] is history[2]
    restored["_history"][1]["x"] = float("nan")  # another NaN: unequal to the one it held, so seen
    assert store.loads(snap)["_history"][1] is not history[1] and not store.sharing


class Generator:  # a level generator built with the config, as 1_InterDimension's env holds one
    def __init__(self, configs):
        self.configs, self.made = configs, 0


def test_an_attribute_holding_the_static_config_names_it_instead_of_copying_it():
    store = Store()
    configs = {"generator": {"parameters": {f"p{i}": list(range(20)) for i in range(40)}}}
    store.pin([configs])
    attrs = {"_state": state(1), "generator": Generator(configs)}
    snap = store.dumps(attrs)
    assert len(snap) < len(pickle.dumps(attrs)) / 4  # the config is named, not copied into every snapshot
    restored = store.loads(snap)
    assert restored["generator"].configs is configs  # one object, as the environment held it
    assert restored["generator"] is not attrs["generator"] and restored["_state"] == state(1)
    store.stop("sharing stopped for another reason")
    later = store.loads(store.dumps({"generator": Generator(configs)}))
    assert later["generator"].configs is configs  # still named once sharing stopped


ENV_MAIN = '''
import copy

from pipeline.runtime import SkinEnv


class Ledger(SkinEnv):
    """Keeps a history of deep copies; `audit` rewrites the first entry in place and pays what it held."""

    def reset(self, mode="load", world_id=None, seed=None):
        self._state = {"n": 0, "seen": 0}  # "seen" mirrors the first entry: the state is the whole truth
        self._t = 0
        self._history = []
        return self._state

    def transition(self, action):
        self._history.append(copy.deepcopy(self._state))
        self._paid = 0.0
        if action["action"] == "count":
            self._state["n"] += 1
        else:
            first = self._history[0]
            self._paid = float(first["n"])
            first["n"] = 10 * first["n"] + self._state["n"]
            self._state["seen"] = first["n"]
        return self._state

    def reward(self, action):
        return self._paid, [], {}
'''


def ledger_env(tmp_path: Path) -> Path:
    env = tmp_path / "ledger"
    (env / "levels").mkdir(parents=True)
    (env / "env_main.py").write_text(ENV_MAIN)
    (env / "config.yaml").write_text(yaml.safe_dump({
        "transition": {"actions": [{"name": "count", "params": []}, {"name": "audit", "params": []}]},
        "termination": {"max_steps": 4}}))
    (env / "levels" / "level_01.yaml").write_text("n: 0\n")
    return env


def best_by_hand(steps: int) -> float:
    """The best total of the Ledger env over every action sequence, played in this process (its rules, not its code)."""
    best = 0.0

    def play(seq):
        n, history, total = 0, [], 0.0
        for action in seq:
            history.append({"n": n})
            if action == "count":
                n += 1
            else:
                total += history[0]["n"]
                history[0]["n"] = 10 * history[0]["n"] + n
        return total

    from itertools import product
    for length in range(steps + 1):
        for seq in product(["count", "audit"], repeat=length):
            best = max(best, play(seq))
    return best


@pytest.mark.parametrize("order", ["breadth", "best"])
def test_a_search_over_an_env_rewriting_its_history_finds_what_replaying_finds(tmp_path, order):
    """Every restore before a step must give back the history as it was: a rewritten first entry
    handed back to a sibling branch would pay it more than the rules do."""
    actions = [{"action": "count", "params": {}}, {"action": "audit", "params": {}}]
    client = EnvClient.start_folder(ledger_env(tmp_path), max_steps=4)
    try:
        client.reset("levels/level_01.yaml")
        found = client.search(actions, max_steps=4, max_nodes=10_000, order=order, time_in_key=True)
        assert found.exhausted and found.best_reward == best_by_hand(4) > 0
        client.reset("levels/level_01.yaml")
        assert sum(client.step(action).reward for action in found.witness) == found.best_reward
    finally:
        client.close()
