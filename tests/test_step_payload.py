"""What a step sends over the sandbox's pipes: what its caller shows, not more (issue 40 item 3)."""
from __future__ import annotations

import copy
from pathlib import Path

from sandbox_kit import LEVEL, LIMITS, STEP

import envforge
from envforge.pipeline.sandbox import Worker
from envforge.pipeline.sandbox.outside.client import EnvClient

CRATE_DOCK = Path(__file__).resolve().parents[1] / "generated_envs" / "reference" / "crate_dock"
COUNTER = '''
from pipeline.runtime import SkinEnv


class Counter(SkinEnv):
    def transition(self, action):
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 1.0, ["counted"], {}
'''


def counter_env(tmp_path):
    env_dir = tmp_path / "counter"
    (env_dir / "levels").mkdir(parents=True)
    (env_dir / "env_main.py").write_text(COUNTER.lstrip())
    (env_dir / "config.yaml").write_text("termination:\n  max_steps: 5\n")
    (env_dir / LEVEL).write_text("n: 0\n")
    return env_dir


def test_a_player_that_shows_the_observation_gets_it_without_the_true_state(tmp_path):
    with Worker(counter_env(tmp_path), LIMITS) as worker:
        env = EnvClient(worker, max_steps=5)
        first, step = env.reset(LEVEL, want_obs=True), env.step(STEP, want_obs=True)
        seen = env.observe(want_obs=True)
        full = env.step(STEP, want_state=True)
    assert [r.state for r in (first, step, seen)] == [None, None, None]
    assert [r.raw_obs["n"] for r in (first, step, seen, full)] == [0, 1, 1, 2]
    assert full.state["n"] == 2


def test_the_gym_adapter_shows_the_structured_observation_and_keeps_its_actions_its_own():
    env = envforge.make(CRATE_DOCK, level="level_01")
    try:
        assert env.actions is not None  # crate_dock's actions are Discrete: info["action"] is one of env.actions
        before = copy.deepcopy(env.actions)
        _, info = env.reset(seed=0)
        assert isinstance(info["observation"], dict) and info["max_reward"] == env.env.max_reward(info["level"])
        _, _, _, _, info = env.step(0)
        assert isinstance(info["observation"], dict) and info["action"] == env.actions[0]
        info["action"]["params"]["changed"] = True  # a caller changing what it was given
        assert env.actions == before
    finally:
        env.close()
