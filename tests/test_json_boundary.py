"""numpy values, tuples and tuple keys cross the JSON boundary; numpy's global RNG is seeded per
episode and kept in snapshots, as `random`'s is."""
from __future__ import annotations

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env

np = pytest.importorskip("numpy")

NUMPY_ENV = (
    ("from pipeline.runtime import SkinEnv", "import numpy as np\nfrom pipeline.runtime import SkinEnv"),
    ("        cells = [", "        self._noise = float(np.random.random())\n        cells = ["),
    ("        return f\"step {omega['t']}: \" + \"\".join(cells)",
     "        return f\"step {omega['t']} noise {self._noise:.6f}: \" + \"\".join(cells)\n\n"
     "    def observe_semantic(self):\n"
     "        return {'t': self._t, 'pos': np.int64(self._state['pos']), 'cells': np.zeros(3),\n"
     "                'seen': {(0, 1): True}, 'pair': (1, 2)}"),
)


def numpy_env(path):
    from envforge.pipeline.testing.tiny_env import ENV_MAIN

    source = ENV_MAIN
    for old, new in NUMPY_ENV:
        assert old in source
        source = source.replace(old, new)
    return write_env(path, replace={"env_main.py": source})


def test_check_accepts_env_with_numpy_observation_tuple_keys_and_numpy_noise(tmp_path):
    env = numpy_env(tmp_path / "np")
    result = envforge("check", env)
    assert result.returncode == 0, result.stdout
    assert "not_json" not in result.stdout and "determinism" not in result.stdout


def test_raw_observation_is_plain_json_and_numpy_rng_is_restored_with_a_snapshot(tmp_path):
    from envforge.pipeline.sandbox import Worker

    env = numpy_env(tmp_path / "np")
    with Worker(env) as worker:
        first = worker.call("reset", level="levels/level_01.yaml", seed=3, want_state=True)
        assert first["raw_obs"] == {"t": 0, "pos": 0, "cells": [0.0, 0.0, 0.0], "seen": {"(0, 1)": True},
                                    "pair": [1, 2]}
        handle = worker.call("snapshot")["handle"]
        step = {"action": "move", "params": {"direction": "right"}}
        a = worker.call("step", action=step)["observation"]
        worker.call("restore", handle=handle)
        b = worker.call("step", action=step)["observation"]
        assert a == b  # the numpy draw after the snapshot repeats
        again = worker.call("reset", level="levels/level_01.yaml", seed=3)["observation"]
        assert again == first["observation"]
        other = worker.call("reset", level="levels/level_01.yaml", seed=4)["observation"]
        assert other != first["observation"]  # seeded per episode: another seed, another draw
