"""The DSL checker: the paper's example validates, and each class of error is reported at its path."""
import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from envforge.dsl_schema import Problem, check_document, check_file, check_text, is_valid, load_schema

EXAMPLES = Path(__file__).resolve().parent.parent / "dsl_schema" / "examples"
B4 = EXAMPLES / "connect_four_b4.yaml"

SMALL = """
meta: {id: "key_room", name: "Key Room", description: "Find the key, open the door."}
state_template:
  globals: {max_steps: 20}
  agent: {pos: [0, 0], has_key: false}
  door: {pos: [3, 3], open: false}
observation:
  policy: "full"
  expose: [agent.pos, agent.has_key, door, t]
reward:
  events:
    - {trigger: "door_opened", value_key: "door_rewards"}
  door_rewards: {opened: 1.0}
transition:
  actions:
    - {name: "move", params: [dx, dy]}
    - {name: "open_door"}
skin:
  type: "text"
  template: "Step {t}/{max_steps}: you are at {agent_pos}, key: {has_key}, door open: {door_open}"
termination:
  max_steps: 20
  conditions: ["door.open == true"]
generator:
  mode: "procedural"
  output_format: "yaml"
  pipeline:
    - {name: "init_from_template", desc: "copy the template", args: {}}
"""


def small() -> dict:
    return yaml.safe_load(SMALL)


def errors_at(doc, path):
    return [p for p in check_document(doc, "env.yaml") if p.severity == "error" and p.path == path]


def test_schema_is_a_valid_draft_2020_12_schema():
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_paper_b4_connect_four_example_validates_unchanged():
    problems = check_file(B4)
    assert is_valid(problems), [str(p) for p in problems]
    # The printed template uses two computed values the DSL never declares; that is worth a warning.
    assert sorted(p.found.split(",")[0] for p in problems) == ["{board_display}", "{game_status}"]
    assert all(p.severity == "warning" and p.path == "skin.template" for p in problems)


def test_every_shipped_example_is_error_free():
    for path in EXAMPLES.glob("*.yaml"):
        assert is_valid(check_file(path)), path


def test_small_document_is_clean():
    assert check_document(small(), "env.yaml") == []


def test_problem_prints_file_path_expected_and_found():
    problem = Problem("config.yaml", "reward.events[2].value_key", "a value map", "'win_bonus'")
    assert str(problem) == "config.yaml: reward.events[2].value_key: expected a value map, found 'win_bonus'"


def mutate(change):
    doc = small()
    change(doc)
    return doc


SCHEMA_CASES = [
    ("missing section", lambda d: d.pop("termination"), "termination", "(required)"),
    ("missing meta.id", lambda d: d["meta"].pop("id"), "meta.id", "(required)"),
    ("wrong type", lambda d: d["termination"].update(max_steps="20"), "termination.max_steps", "an integer"),
    ("non-positive steps", lambda d: d["termination"].update(max_steps=0), "termination.max_steps", ">= 1"),
    ("expose not a list", lambda d: d["observation"].update(expose="agent.pos"), "observation.expose", "a list"),
    ("no actions", lambda d: d["transition"].update(actions=[]), "transition.actions", "at least 1 item"),
    ("reward without rules", lambda d: d["reward"].pop("events"), "reward", "events or conditions"),
    (
        "event without value",
        lambda d: d["reward"]["events"][0].pop("value_key"),
        "reward.events[0]",
        "value_key or value",
    ),
    ("bad tag value", lambda d: d["meta"].update(tags={"reward": "cumulative"}), "meta.tags.reward", '"accumulative"'),
    (
        "bad param type",
        lambda d: d["transition"]["actions"][0].update(params=[{"name": "dx", "type": "int"}]),
        "transition.actions[0].params[0].type",
        '"integer"',
    ),
    ("text skin without template", lambda d: d["skin"].pop("template"), "skin.template", "a string (required)"),
    ("bad output format", lambda d: d["generator"].update(output_format="xml"), "generator.output_format", '"yaml"'),
    (
        "named skin without type",
        lambda d: d.update(skins={"ascii_view": {"template": "{t}"}}),
        "skins.ascii_view.type",
        "(required)",
    ),
]


@pytest.mark.parametrize("label,change,path,expected", SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_schema_errors_name_the_field(label, change, path, expected):
    found = errors_at(mutate(change), path)
    assert found, [str(p) for p in check_document(mutate(change), "env.yaml")]
    assert any(expected in p.expected for p in found), [str(p) for p in found]
    assert str(found[0]).startswith(f"env.yaml: {path}: expected ")


def test_expose_path_missing_from_state_template():
    doc = mutate(lambda d: d["observation"]["expose"].append("agent.postion"))
    [problem] = errors_at(doc, "observation.expose[4]")
    assert "'agent.postion'" in problem.found and "'postion' is not under state_template.agent" in problem.found


def test_expose_path_through_a_scalar():
    doc = mutate(lambda d: d["observation"]["expose"].append("agent.has_key.colour"))
    [problem] = errors_at(doc, "observation.expose[4]")
    assert "state_template.agent.has_key is boolean" in problem.found


def test_expose_accepts_reserved_names_and_declared_views():
    doc = mutate(lambda d: d["observation"].update(
        expose=["t", "max_steps", "remaining_steps", "last_action_result", "visible_tiles", "room_map"],
        views={"room_map": "ASCII map of the room"}))
    assert [p for p in check_document(doc, "env.yaml") if p.path.startswith("observation")] == []


def test_undeclared_view_in_expose_is_an_error():
    doc = mutate(lambda d: d["observation"]["expose"].append("room_map"))
    assert errors_at(doc, "observation.expose[4]")


def test_value_key_names_a_map_that_does_not_exist():
    doc = mutate(lambda d: d["reward"]["events"][0].update(value_key="win_bonus"))
    [problem] = errors_at(doc, "reward.events[0].value_key")
    assert str(problem) == ("env.yaml: reward.events[0].value_key: expected the name of a value map defined under "
                            "reward (door_rewards), found 'win_bonus', which is not defined under reward")


def test_value_key_names_something_that_is_not_a_map():
    doc = mutate(lambda d: d["reward"].update(door_rewards=1.0))
    assert errors_at(doc, "reward.events[0].value_key")


def test_value_map_entries_are_numbers():
    doc = mutate(lambda d: d["reward"]["door_rewards"].update(opened="one"))
    assert errors_at(doc, "reward.door_rewards.opened")


def test_duplicate_action_names():
    doc = mutate(lambda d: d["transition"]["actions"].append({"name": "move", "params": ["x"]}))
    [problem] = errors_at(doc, "transition.actions[2].name")
    assert "transition.actions[0] is already 'move'" in problem.expected


def test_action_name_must_be_an_identifier():
    doc = mutate(lambda d: d["transition"]["actions"][1].update(name="open door"))
    [problem] = errors_at(doc, "transition.actions[1].name")
    assert "identifier" in problem.expected and problem.found == "'open door'"


def test_duplicate_parameter_names():
    doc = mutate(lambda d: d["transition"]["actions"][0].update(params=["dx", "dx"]))
    assert errors_at(doc, "transition.actions[0].params[1]")


def test_typed_parameter_range_must_be_ordered_and_numeric():
    doc = mutate(
        lambda d: d["transition"]["actions"][0].update(
            params=[
                {"name": "dx", "type": "integer", "range": [1, -1]},
                {"name": "dy", "type": "string", "range": [0, 1]},
            ]
        )
    )
    assert errors_at(doc, "transition.actions[0].params[0].range")
    assert errors_at(doc, "transition.actions[0].params[1].range")


def test_enum_values_match_the_parameter_type():
    doc = mutate(
        lambda d: d["transition"]["actions"][0].update(params={"dx": {"type": "integer", "enum": [-1, "0", 1]}})
    )
    assert errors_at(doc, "transition.actions[0].params.dx.enum[1]")


def test_termination_max_steps_disagrees_with_globals():
    doc = mutate(lambda d: d["termination"].update(max_steps=30))
    [problem] = errors_at(doc, "termination.max_steps")
    assert problem.expected.startswith("20 ") and problem.found == "30"


def test_max_steps_only_in_termination_is_fine():
    doc = mutate(lambda d: d["state_template"].pop("globals"))
    assert is_valid(check_document(doc, "env.yaml"))


def test_termination_condition_that_does_not_parse():
    doc = mutate(lambda d: d["termination"]["conditions"].append("door.open = true"))
    [problem] = errors_at(doc, "termination.conditions[1]")
    assert "'door.open = true'" in problem.found and "column" in problem.found


def test_reward_condition_that_does_not_parse():
    doc = mutate(lambda d: d["reward"].update(conditions=[{"if": "agent.has_key && door.open", "value": 1}]))
    assert errors_at(doc, "reward.conditions[0].if")


def test_condition_may_not_call_functions():
    doc = mutate(lambda d: d["termination"]["conditions"].append("__import__('os').system('x')"))
    assert errors_at(doc, "termination.conditions[1]")


def test_condition_on_unknown_state_path_is_a_warning():
    problems = check_document(mutate(lambda d: d["termination"]["conditions"].append("goal.reached")), "env.yaml")
    [problem] = [p for p in problems if p.path == "termination.conditions[1]"]
    assert problem.severity == "warning"


def test_skin_placeholder_not_derivable_is_a_warning():
    doc = mutate(lambda d: d["skin"].update(template="{t} {agent_pos} {door_colour}"))
    problems = check_document(doc, "env.yaml")
    assert is_valid(problems)
    [problem] = problems
    assert (problem.path, problem.severity) == ("skin.template", "warning") and "{door_colour}" in problem.found


def test_named_skins_are_checked_like_the_default_skin():
    doc = mutate(lambda d: d.update(skins={"inverse": {"type": "text", "template": "{t} {gold}"}}))
    [problem] = check_document(doc, "env.yaml")
    assert problem.path == "skins.inverse.template" and problem.severity == "warning"


def test_unknown_top_level_key_is_a_warning_not_ignored():
    problems = check_document(mutate(lambda d: d.update(rewards={"x": 1})), "env.yaml")
    assert is_valid(problems)
    [problem] = problems
    assert problem.path == "rewards" and problem.severity == "warning"


def test_misspelt_action_key_is_a_warning():
    doc = mutate(lambda d: d["transition"]["actions"][1].update(parameters=["door_id"]))
    [problem] = check_document(doc, "env.yaml")
    assert problem.path == "transition.actions[1].parameters" and problem.severity == "warning"


def test_all_problems_are_reported_at_once():
    def break_everything(d):
        d["meta"].pop("name")
        d["reward"]["events"][0]["value_key"] = "nope"
        d["termination"]["max_steps"] = 5
        d["termination"]["conditions"] = ["door.open =="]
    paths = {p.path for p in check_document(mutate(break_everything), "env.yaml") if p.severity == "error"}
    assert paths == {"meta.name", "reward.events[0].value_key", "termination.max_steps", "termination.conditions[0]"}


def test_extensions_are_accepted():
    doc = small()
    doc["meta"]["tags"] = {"reward": "binary", "observation": "full", "semantics": "inverse"}
    doc["transition"]["actions"][0] = {
        "name": "move", "description": "Move one cell.",
        "params": [{"name": "dx", "type": "integer", "enum": [-1, 0, 1], "description": "columns to move"},
                   {"name": "dy", "type": "integer", "range": [-1, 1]}],
    }
    doc["skins"] = {"ascii": {"type": "ascii", "template": "{t}"}, "image": {"type": "image"}}
    doc["reward"]["conditions"] = [{"if": "agent.has_key and not door.open", "value": 0.1}]
    assert check_document(doc, "env.yaml") == []


# ---- documents that are not documents ---------------------------------------------------------

def test_malformed_yaml_is_a_located_problem(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("meta:\n  id: x\n  name: [unclosed\nreward: {}\n")
    [problem] = check_file(path)
    assert problem.severity == "error" and problem.expected == "valid YAML"
    assert problem.path.startswith("line ") and problem.line is not None


def test_top_level_list_is_a_located_problem():
    [problem] = check_text("- meta\n- reward\n", "config.yaml")
    assert (problem.path, problem.found) == ("(document)", "a list")


def test_empty_file_is_a_located_problem():
    [problem] = check_text("", "config.yaml")
    assert problem.path == "(document)" and problem.found == "an empty document"


def test_missing_file_is_a_problem_not_an_exception(tmp_path):
    [problem] = check_file(tmp_path / "nope.yaml")
    assert problem.path == "(file)" and problem.found == "no such file"


def test_binary_file_is_a_problem(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    [problem] = check_file(path)
    assert problem.path == "(file)" and "UTF-8" in problem.expected


def test_duplicate_keys_are_errors_with_lines():
    text = SMALL + "termination:\n  max_steps: 20\n"
    problems = [p for p in check_text(text, "config.yaml") if p.path == "termination"]
    assert problems and problems[0].severity == "error" and "YAML keeps only the last" in problems[0].found


def test_problems_from_text_carry_line_numbers():
    text = B4.read_text().replace('value_key: "loss_rewards"', 'value_key: "lose_rewards"')
    [problem] = [p for p in check_text(text, "config.yaml") if p.severity == "error"]
    assert problem.path == "reward.events[1].value_key"
    assert text.splitlines()[problem.line - 1].strip() == 'value_key: "lose_rewards"'


def test_problem_round_trips_through_json():
    [problem] = check_text("", "config.yaml")
    assert json.loads(json.dumps(problem.to_dict()))["path"] == "(document)"


def test_check_document_does_not_modify_the_document():
    doc = small()
    before = copy.deepcopy(doc)
    check_document(doc, "env.yaml")
    assert doc == before
