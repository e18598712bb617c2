"""envforge environments as Gymnasium environments: Gymnasium's own checker passes on every
environment in generated_envs/ and on the offline demo's accepted ones."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

import envforge  # noqa: E402
from pipeline import layout  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
GENERATED = [e.path for e in layout.find_envs(ROOT / "generated_envs")]


@pytest.fixture(scope="module")
def demo_envs(tmp_path_factory):
    """The offline demo's accepted environments, made through the Python API."""
    tmp = tmp_path_factory.mktemp("gym_demo")
    saved = {k: os.environ.pop(k, None) for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ENVFORGE_MODEL")}
    os.environ.update(ENVFORGE_CACHE=str(tmp / "cache.sqlite"), ENVFORGE_DOTENV=str(tmp / ".env"))
    try:
        run = envforge.generate(ROOT / "examples" / "themes.txt", tmp / "demo", provider="replay")
    finally:
        os.environ.pop("ENVFORGE_CACHE"), os.environ.pop("ENVFORGE_DOTENV")
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    return run


def _check(path, **kwargs) -> list[str]:
    env = envforge.make(path, render_mode="ansi", **kwargs)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
    finally:
        env.close()
    # the only warning left: a directly made env has no registry spec to test other render modes with
    return [str(w.message) for w in caught if "not having a spec" not in str(w.message)]


def test_generated_envs_holds_the_reference_environments():
    assert {p.name for p in GENERATED} >= {"crate_dock", "tide_pool"}


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.name)
@pytest.mark.parametrize("action_space", ["auto", "text"])
def test_check_env_passes_on_generated_envs(path, action_space):
    assert _check(path, action_space=action_space) == []


def test_check_env_passes_on_the_demos_accepted_envs(demo_envs):
    assert len(demo_envs.accepted) == 2 and len(demo_envs.rejected) == 1
    for env in demo_envs.accepted:
        assert _check(env.path) == [], env.name


def test_action_space_is_discrete_where_the_dsl_types_every_parameter():
    env = envforge.make(CRATE_DOCK)
    assert env.action_space == gymnasium.spaces.Discrete(5)
    assert env.actions[0] == {"action": "move", "params": {"direction": "north"}}
    assert env.actions[4] == {"action": "wait", "params": {}}
    assert isinstance(envforge.make(CRATE_DOCK, action_space="text").action_space, gymnasium.spaces.Text)


def test_seeded_reset_is_repeatable_and_steps_report_terminated_and_truncated_apart():
    env = envforge.make(CRATE_DOCK)
    try:
        first, info = env.reset(seed=11)
        again, info2 = env.reset(seed=11)
        assert first == again and info == info2 and info["level"].startswith("levels/")
        assert isinstance(info["observation"], dict) and "board" in info["observation"]
        wait = env.actions.index({"action": "wait", "params": {}})
        for n in range(1, 31):
            obs, reward, terminated, truncated, info = env.step(wait)
            assert not terminated and truncated == (n == 30)
        solved_obs, info = env.reset(options={"level": "level_01"})
        moves = [ln for ln in (ROOT / "examples" / "crate_dock_level_01.actions").read_text().splitlines()
                 if ln.startswith("move")]
        for line in moves:  # a text action works in a Discrete env too, parsed as in `envforge play`
            obs, reward, terminated, truncated, info = env.step(line)
        assert terminated and not truncated and info["total_reward"] == 1.0
    finally:
        env.close()
    assert env.session is None  # close() stopped the sandbox worker


def test_text_that_is_not_an_action_uses_a_step_and_changes_nothing():
    env = envforge.make(CRATE_DOCK, action_space="text", level="level_01")
    try:
        _, before = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("move north south east")
        assert reward == 0.0 and not terminated and info["steps"] == 1
        assert info["observation"]["board"] == before["observation"]["board"]
        assert "expected NAME=VALUE" in info["invalid_action"]
        assert "unknown action" in obs  # what the environment itself made of it
    finally:
        env.close()


def test_registered_ids_make_through_gymnasium():
    ids = envforge.register(ROOT / "generated_envs")
    assert "envforge/crate_dock-v0" in ids and "envforge/tide_pool-v0" in ids
    env = gymnasium.make("envforge/tide_pool-v0")
    try:
        obs, info = env.reset(seed=3)
        assert "tide level" in obs
        check_env(env.unwrapped)
    finally:
        env.close()


def test_vector_env_plays_several_episodes_at_once():
    envs = envforge.make_vec(CRATE_DOCK, 2)
    try:
        obs, infos = envs.reset(seed=[1, 2])
        assert len(obs) == 2 and all("Step 0/30" in o for o in obs)
        obs, rewards, terminated, truncated, infos = envs.step([4, 4])
        assert list(rewards) == [0.0, 0.0] and all("Step 1/30" in o for o in obs)
    finally:
        envs.close()


def test_reset_can_generate_a_level_from_the_seed():
    env = envforge.make(CRATE_DOCK)
    try:
        obs, info = env.reset(seed=5, options={"generate": True})
        again, info2 = env.reset(seed=5, options={"generate": True})
        other, info3 = env.reset(seed=6, options={"generate": True})
    finally:
        env.close()
    assert info["level"].startswith("seed:") and info["max_reward"] is None
    assert (obs, info["level"]) == (again, info2["level"]) and info3["level"] != info["level"]
    assert "Step 0/30" in obs
