"""envforge environments as Gymnasium environments: Gymnasium's own checker passes on every
environment in generated_envs/ and on the offline demo's accepted ones."""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

import envforge  # noqa: E402
from envforge.pipeline import layout  # noqa: E402

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
GENERATED = [e.path for e in layout.find_envs(ROOT / "generated_envs")]


@pytest.fixture(scope="module")
def demo_envs(tmp_path_factory, generate_demo):
    """The offline demo's accepted environments, through the Python API: generate resumes a copy of
    the session's one run of the demo (conftest.py), so it reads back what it finished."""
    tmp = tmp_path_factory.mktemp("gym_demo")
    generate_demo.copy_to(tmp / "demo")
    saved = {k: os.environ.pop(k, None) for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ENVFORGE_MODEL")}
    os.environ.update(ENVFORGE_CACHE=str(tmp / "cache.sqlite"), ENVFORGE_DOTENV=str(tmp / ".env"))
    try:
        run = envforge.generate(ROOT / "examples" / "themes.txt", tmp / "demo", provider="replay", resume=True)
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
    return [str(w.message) for w in caught]  # none, the spec's too (issue 23: make gave no spec)


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


AUTOENV_FORMAT = ROOT / "tests" / "fixtures" / "autoenv_format" / "maze_escape"
FOREIGN = Path("/work/shared/autoenv-dev")


def test_make_gives_a_spec_that_makes_the_same_env_again():
    env = envforge.make(CRATE_DOCK, level="level_01")
    assert env.spec.id == "envforge/crate_dock-v0"
    again = env.spec.make()
    try:
        assert again.unwrapped.fixed_level == env.fixed_level and again.action_space == env.action_space
    finally:
        again.close(), env.close()


def test_an_autoenv_format_folder_without_dsl_domains_gets_a_discrete_space_from_action_space_txt(tmp_path):
    import shutil

    env_dir = tmp_path / "columns"
    shutil.copytree(AUTOENV_FORMAT, env_dir)
    config = (env_dir / "config.yaml").read_text()
    start, end = config.index("  actions:\n"), config.index("skin:\n")
    (env_dir / "config.yaml").write_text(
        config[:start] + '  actions:\n    - name: "drop_disk"\n      params: [column]\n' + config[end:]
    )
    (env_dir / "action_space.txt").write_text(
        '[{"name": "drop_disk", "description": "Drop a disk into a column.", '
        '"parameters": {"column": "Column index (0-3) where the disk is dropped"}}]\n')
    env = envforge.make(env_dir)
    assert env.action_space == gymnasium.spaces.Discrete(4)
    assert env.actions == [{"action": "drop_disk", "params": {"column": c}} for c in range(4)]


def test_an_autoenv_format_folder_gets_a_discrete_space_where_its_actions_can_be_listed():
    """Issue 23: an AutoEnv-format folder (no DSL domains) got a Text space whose random samples
    never formed an action; where action_space.txt or the levels list the values, it is Discrete."""
    corpus = [p for p in (FOREIGN / "22_ColumnStrategy", FOREIGN / "25_PatternMatching") if p.is_dir()]
    if not corpus:
        pytest.skip("the AutoEnv corpus is not on this machine")
    for path in corpus:
        env = envforge.make(path)
        try:
            assert isinstance(env.action_space, gymnasium.spaces.Discrete), path.name
            assert all(a["params"] for a in env.actions if a["action"] in ("drop_disk", "flip")), path.name
            env.action_space.seed(0)
            env.reset(seed=0)
            _, _, _, _, info = env.step(env.action_space.sample())
            assert "invalid_action" not in info, info  # a sample is an action of the space
        finally:
            env.close()


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


@pytest.fixture(scope="module")
def judged_root(tmp_path_factory, generate_demo):
    """A folder of environments as verify left them: the demo's two it accepted, the one it rejected
    (at reliability) copied out of _rejected/, and a reference environment no verify judged."""
    root = tmp_path_factory.mktemp("judged")
    for env in layout.find_envs(generate_demo.out):
        shutil.copytree(env.path, root / env.path.name)
    (rejected,) = (generate_demo.out / "_rejected").iterdir()
    shutil.copytree(rejected, root / "card_game")
    shutil.copytree(CRATE_DOCK, root / "crate_dock", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_register_registers_what_verify_accepted_and_names_what_it_left_out(judged_root):
    with pytest.warns(UserWarning) as caught:
        ids = envforge.register(judged_root)
    accepted = sorted(p.name for p in judged_root.iterdir() if p.name not in ("card_game", "crate_dock"))
    assert len(accepted) == 2 and ids == [f"envforge/{name}-v0" for name in accepted]
    (warning,) = [str(w.message) for w in caught]
    assert "2 environment folder(s)" in warning
    assert "card_game: rejected by envforge verify at reliability" in warning
    assert "crate_dock: never verified (no verification.json" in warning
    for name in ("card_game", "crate_dock"):
        with pytest.raises(gymnasium.error.NameNotFound):
            gymnasium.make(f"envforge/{name}-v0")


def test_a_persons_review_decision_stands_over_verify_s_verdict(judged_root, tmp_path):
    from envforge.pipeline import manifest
    from envforge.pipeline.kinds import HumanReview

    root = tmp_path / "root"
    shutil.copytree(judged_root / "card_game", root / "card_game")
    manifest.decided(root / "card_game", HumanReview("accepted", "the reward is fine by me"))
    shutil.copytree(judged_root / sorted(os.listdir(judged_root))[0], root / "overruled")
    manifest.decided(root / "overruled", HumanReview("rejected", "too easy"))
    with pytest.warns(UserWarning, match="overruled: rejected by a person \\(envforge review\\): too easy"):
        assert envforge.register(root) == ["envforge/card_game-v0"]


def test_registered_ids_make_through_gymnasium_with_the_step_cap_on_the_spec(judged_root):
    with pytest.warns(UserWarning):
        ids = envforge.register(judged_root)
    for env_id in ids:
        env = gymnasium.make(env_id)
        try:
            max_steps = env.unwrapped.max_steps
            assert env.spec.max_episode_steps == max_steps == envforge.open(env.unwrapped.env.path).max_steps
            obs, info = env.reset(seed=3)
            check_env(env.unwrapped)
        finally:
            env.close()


def test_make_gives_the_spec_the_configs_step_cap():
    env = envforge.make(CRATE_DOCK)
    assert env.spec.max_episode_steps == env.max_steps == 30
    again = env.spec.make()  # as gymnasium.make does: within a TimeLimit of the same cap
    try:
        assert again.spec.max_episode_steps == 30 and isinstance(again, gymnasium.wrappers.TimeLimit)
    finally:
        again.close(), env.close()


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
