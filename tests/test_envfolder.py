"""The one reader of an environment folder: safe_io's bounds and EnvSpec's rules, as specifications."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from envforge.pipeline import safe_io
from envforge.pipeline.envfolder.spec import EnvSpec, claimed_max_rewards, max_steps
from envforge.pipeline.errors import LocatedError
from envforge.pipeline.testing.tiny_env import write_env

REFERENCE = Path(__file__).resolve().parent.parent / "generated_envs" / "reference"


def located(fn, *args, **kwargs) -> str:
    with pytest.raises(LocatedError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_yaml_alias_bomb_is_refused_by_counting_not_expanding(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (tmp_path / "c.yaml").write_text("\n".join(lines) + "\n")
    assert len((tmp_path / "c.yaml").read_bytes()) < 600
    message = located(safe_io.load_yaml, tmp_path, "c.yaml")
    assert message.startswith(f"{tmp_path / 'c.yaml'}:") and "nodes once aliases are expanded" in message


def test_yaml_recursive_alias_and_ordinary_aliases(tmp_path):
    assert "a recursive alias" in located(safe_io.parse_yaml, "a: &a [1, *a]\n", "r.yaml")
    assert safe_io.parse_yaml("a: &a [1, 2]\nb: *a\n", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}


def test_json_refuses_nan_infinity_depth_and_long_integers():
    assert located(safe_io.parse_json, '{"x": NaN}', "m.json") == "m.json: expected a finite number, found NaN"
    assert "found 1e999" in located(safe_io.parse_json, "[1e999]", "m.json")
    assert "m.json:1: expected nesting at most 100" in located(safe_io.parse_json, "[" * 5000 + "]" * 5000, "m.json")
    assert "one of 5000 digits" in located(safe_io.parse_json, "9" * 5000, "m.json")
    assert safe_io.parse_json('{"x": NaN}', "m.json", finite=False)["x"] != 0


def test_special_files_links_and_escapes_are_refused(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    env = tmp_path / "env"
    (env / "sub").mkdir(parents=True)
    os.mkfifo(env / "pipe")
    os.link(outside, env / "hard.txt")
    os.symlink(outside, env / "soft.txt")
    os.symlink(tmp_path, env / "dirlink")
    assert "found a named pipe" in located(safe_io.read_text, env, "pipe")
    assert "found a hard link" in located(safe_io.read_text, env, "hard.txt")
    assert "found a symbolic link (never followed)" in located(safe_io.read_text, env, "soft.txt")
    assert "found a symbolic link (never followed)" in located(safe_io.read_text, env, "dirlink/outside.txt")
    assert "a path inside the environment folder" in located(safe_io.read_text, env, "../outside.txt")
    assert "found a character device" in located(safe_io.read_text, Path("/dev"), "zero")
    (env / "big.txt").write_bytes(b"x" * 101)
    assert "expected at most 100 bytes" in located(safe_io.read_text, env, "big.txt", 100)
    (env / "sub" / "ok.txt").write_text("fine")
    assert safe_io.read_text(env, "sub/ok.txt") == "fine"
    assert sorted(safe_io.walk(env)) == ["big.txt", "hard.txt", "sub/ok.txt"]  # no links, no pipes
    assert safe_io.read_shown(env, "soft.txt").startswith("(not shown: ")


def test_level_lists_skip_links_and_refuse_a_linked_folder(tmp_path):
    env = write_env(tmp_path / "corridor")
    os.symlink(tmp_path / "elsewhere.yaml", env / "levels" / "level_99.yaml")
    assert [str(level) for level in EnvSpec.open(env).levels("test")] == [
        "levels/level_01.yaml",
        "levels/level_02.yaml",
    ]
    os.rename(env / "val_levels", tmp_path / "val")
    os.symlink(tmp_path / "val", env / "val_levels")
    assert "val_levels: expected a folder inside the environment folder, found a symbolic link" in located(
        EnvSpec.open, env
    )


@pytest.mark.parametrize("value, found", [(True, "boolean true"), ("30", "string '30'"), (-5, "integer -5"),
                                          (0, "integer 0"), (2.5, "number 2.5")])
def test_max_steps_rule_refuses_what_is_not_a_positive_integer(value, found):
    message = located(max_steps, {"termination": {"max_steps": value}})
    assert message == f"config.yaml: termination.max_steps: expected an integer of at least 1, found {found}"


def test_max_steps_rule_default_and_value():
    assert max_steps({}) == 100 and max_steps({"termination": {"conditions": []}}) == 100
    assert max_steps({"termination": {"max_steps": 30}}) == 30


def test_claimed_max_rewards_must_be_finite_and_not_vanishing():
    assert claimed_max_rewards({"levels": {"levels/l1.yaml": {"max_reward": 2}, "l2.yaml": 0}}) == {
        "l1.yaml": 2.0,
        "l2.yaml": 0.0,
    }
    for bad in (float("nan"), float("inf"), 1e-300, -1.0, "1.0", None, True):
        assert "expected a finite number, 0 or from 1e-06 up" in located(
            claimed_max_rewards, {"levels": {"l.yaml": bad}}
        )


def test_reference_env_reads_once_with_everything_an_agent_needs():
    spec = EnvSpec.open(REFERENCE / "crate_dock")
    assert spec.max_steps == spec.config["termination"]["max_steps"]
    assert spec.instruction and spec.action_text and spec.tags
    assert len(spec.levels("test")) == len(spec.max_rewards) - len(spec.levels("val"))
    assert spec.max_reward(spec.levels("test")[0]) is not None


def test_errors_never_print_an_empty_location():
    assert str(LocatedError.at("", "x", "y")) == "(unnamed file): expected x, found y"
    assert str(LocatedError.at("a.yaml", "x", "y", 3)) == "a.yaml:3: expected x, found y"


# -- the one action space ------------------------------------------------------------------

COLUMNS_CONFIG = {"transition": {"actions": [{"name": "drop_disk", "params": ["column"]},
                                             {"name": "move", "params": [{"name": "direction", "type": "string",
                                                                          "enum": ["left", "right"]}]}]}}
COLUMNS_TEXT = (
    '[{"name": "drop_disk", "parameters": {"column": "Column index (0-6) where the disk should be dropped"}}]'
)


def test_untyped_parameter_gets_every_value_the_evidence_names_and_says_where_from():
    from envforge.pipeline.envfolder.action_text import ActionText
    from envforge.pipeline.envfolder.actions import ActionSpace

    space = ActionSpace.from_config(COLUMNS_CONFIG, [("action_space.txt", COLUMNS_TEXT)])
    drops = [c["params"]["column"] for c in space.candidates() if c["action"] == "drop_disk"]
    assert drops == [0, 1, 2, 3, 4, 5, 6]
    assert space.sources == {("drop_disk", "column"): "action_space.txt", ("move", "direction"): "config.yaml"}
    rng = __import__("random").Random(3)
    assert {space.sample_params(space.get("drop_disk"), rng)["column"] for _ in range(200)} == set(range(7))
    # an inferred domain steers sampling and search; only a declared one makes an action invalid
    assert space.invalid_reason({"action": "drop_disk", "params": {"column": 9}}) is None
    assert "must be one of ['left', 'right']" in space.invalid_reason({"action": "move", "params": {"direction": "up"}})
    assert "column" not in str(ActionText(space).tools()[0]["parameters"]["properties"]["column"].get("enum", ""))
    assert "read from action_space.txt" in ActionText(space).describe()


def test_untyped_parameter_without_evidence_keeps_one_sampled_value():
    from envforge.pipeline.envfolder.actions import NO_EVIDENCE, ActionSpace

    space = ActionSpace.from_config(COLUMNS_CONFIG, [("agent_instruction.txt", "Win the game.")])
    assert len([c for c in space.candidates() if c["action"] == "drop_disk"]) == 1
    assert space.sources["drop_disk", "column"] == NO_EVIDENCE


@pytest.mark.parametrize("text", ["drop_disk 3", "drop_disk column=3", "drop_disk(column=3)", "drop_disk(3)",
                                  '{"action": "drop_disk", "params": {"column": 3}}'])
def test_typed_text_parses_in_every_form_play_accepts(text):
    from envforge.pipeline.envfolder.action_text import ActionText
    from envforge.pipeline.envfolder.actions import ActionSpace

    parsed = ActionText(ActionSpace.from_config(COLUMNS_CONFIG)).parse(text)
    assert parsed == {"action": "drop_disk", "params": {"column": 3}}


def test_column_strategy_from_the_autoenv_corpus_gets_all_seven_columns():
    from envforge.pipeline.envfolder.actions import ActionSpace

    folder = Path("/work/shared/autoenv-dev/22_ColumnStrategy")
    if not folder.is_dir():
        pytest.skip("the AutoEnv development corpus is not on this machine")
    space = EnvSpec.open(folder).actions
    assert isinstance(space, ActionSpace)
    assert [c["params"]["column"] for c in space.candidates()] == list(range(7))
    assert space.sources["drop_disk", "column"] == "action_space.txt"


def test_on_a_level_an_untyped_parameter_takes_the_values_the_level_holds_under_its_name():
    from envforge.pipeline.envfolder.actions import NO_EVIDENCE, ActionSpace

    config = {"transition": {"actions": [{"name": "accuse", "params": ["time_index", "perpetrator", "action"]},
                                         {"name": "drop_disk", "params": ["column"]}]},
              "state_template": {"root_cause_time": 0, "perpetrator": "nobody"}}
    space = ActionSpace.from_config(config, [("action_space.txt", COLUMNS_TEXT)],
                                    [("config.yaml state_template", config["state_template"])])
    assert space.sources["accuse", "perpetrator"] == NO_EVIDENCE  # a template's placeholders are no domain
    level = {"truth": {"root_cause_time": 8, "root_cause_perpetrator": "p5", "root_cause_action": "fraud"},
             "events": [{"perpetrator": "p1", "action": "fraud"}, {"perpetrator": "p5", "flag": True}],
             "current_time_index": 40, "time_available": 3}
    on_level = space.for_state(level)
    accusations = [c["params"] for c in on_level.candidates() if c["action"] == "accuse"]
    assert {"time_index": 8, "perpetrator": "p5", "action": "fraud"} in accusations
    assert len(accusations) == 2 * 2 * 1  # times {8, 40}, people {p5, p1}, actions {fraud}
    assert on_level.sources["accuse", "time_index"] == "the level"
    assert on_level.sources["drop_disk", "column"] == "action_space.txt"  # other evidence is kept
    assert on_level.invalid_reason({"action": "accuse", "params": {"time_index": 3, "perpetrator": "x",
                                                                   "action": "y"}}) is None  # still a guess
    assert not on_level.complete()


def test_a_search_takes_at_most_max_combinations_of_one_action_the_same_each_time_and_says_it_sampled():
    from envforge.pipeline.envfolder.actions import MAX_COMBINATIONS, ActionSpace

    digits = {"type": "integer", "range": [0, 9]}
    config = {"transition": {"actions": [
        {"name": "dial", "params": [{"name": n, **digits} for n in ("a", "b", "c")]},  # 1,000 combinations
        {"name": "move", "params": [{"name": "dx", "type": "integer", "range": [-1, 1]},
                                    {"name": "dy", "type": "integer", "range": [-1, 1]}]}]}}
    space = ActionSpace.from_config(config)
    dials = [c["params"] for c in space.candidates() if c["action"] == "dial"]
    assert len(dials) == MAX_COMBINATIONS == 256
    assert len({tuple(d.values()) for d in dials}) == MAX_COMBINATIONS  # no repeats
    assert {d["a"] for d in dials} == set(range(10))  # spread over the whole product, not its first corner
    assert dials[0] == {"a": 0, "b": 0, "c": 0} and dials == [c["params"] for c in space.candidates()
                                                              if c["action"] == "dial"]  # deterministic
    assert len([c for c in space.candidates() if c["action"] == "move"]) == 9  # a small product stays whole
    assert not space.complete()  # a search over a sample is not exhaustive: its max is a lower bound
    assert ActionSpace.from_config({"transition": {"actions": config["transition"]["actions"][1:]}}).complete()

    untyped = {"transition": {"actions": [{"name": "give", "params": ["giver", "receiver", "item"]}]}}
    level = {"giver": [f"g{i}" for i in range(32)], "receiver": [f"r{i}" for i in range(32)],
             "item": [f"i{i}" for i in range(32)]}
    on_level = ActionSpace.from_config(untyped).for_state(level)
    assert len(on_level.candidates()) == MAX_COMBINATIONS  # not 32,768 per search node


def test_a_parameter_whose_example_value_is_a_list_gets_list_values_not_its_items():
    """`{"position": [1, 2]}` in action_space.txt is one value of a list parameter: the search must
    send a list there, not the integers 1 and 2 (an env reading position[0] fails on an integer)."""
    from envforge.pipeline.envfolder.actions import ActionSpace

    config = {"transition": {"actions": [{"name": "place", "params": ["position"]},
                                         {"name": "tag", "params": [{"name": "labels", "type": "array"}]}]}}
    text = 'place a piece: {"action": "place", "params": {"position": [1, 2]}}; tag with labels'
    space = ActionSpace.from_config(config, [("action_space.txt", text)])
    assert space.candidates() == [{"action": "place", "params": {"position": [1, 2]}},
                                  {"action": "tag", "params": {"labels": []}}]
    grid = ActionSpace.from_config(config, [("action_space.txt", "position: [row, col] of the cell")])
    assert grid.candidates()[0] == {"action": "place", "params": {"position": [0, 0]}}
