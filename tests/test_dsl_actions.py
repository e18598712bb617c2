"""Action-space text and tool-call schemas derived from transition.actions."""
from pathlib import Path

import jsonschema
import yaml

from envforge.dsl_schema.actions import actions
from envforge.pipeline.envfolder.action_text import ActionText
from envforge.pipeline.envfolder.actions import ActionSpace


def _tools(doc):
    return ActionText(ActionSpace.from_config(doc)).tools()


def _text(doc):
    return ActionText(ActionSpace.from_config(doc)).derived()

EXAMPLES = Path(__file__).resolve().parent.parent / "dsl_schema" / "examples"
B4 = yaml.safe_load((EXAMPLES / "connect_four_b4.yaml").read_text())
VAULT = yaml.safe_load((EXAMPLES / "lantern_vault.yaml").read_text())


def test_plain_parameter_names_become_untyped_required_parameters():
    [tool] = _tools(B4)
    assert tool["name"] == "drop_disk"
    assert tool["parameters"]["required"] == ["column"]
    assert "type" not in tool["parameters"]["properties"]["column"]


def test_typed_parameters_carry_type_enum_and_range():
    tools = {t["name"]: t for t in _tools(VAULT)}
    assert set(tools) == {"move", "trim_wick", "wait"}
    direction = tools["move"]["parameters"]["properties"]["direction"]
    assert direction["type"] == "string" and direction["enum"] == ["north", "south", "east", "west"]
    amount = tools["trim_wick"]["parameters"]["properties"]["amount"]
    assert (amount["type"], amount["minimum"], amount["maximum"]) == ("integer", 1, 3)
    assert tools["wait"]["parameters"]["properties"] == {} and tools["wait"]["parameters"]["required"] == []
    assert tools["move"]["description"] == "Walk one cell; costs one unit of oil."


def test_tool_parameters_are_json_schemas_that_accept_good_calls_and_reject_bad_ones():
    schema = {t["name"]: t["parameters"] for t in _tools(VAULT)}["trim_wick"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema.Draft202012Validator(schema).is_valid({"amount": 2})
    assert not jsonschema.Draft202012Validator(schema).is_valid({"amount": 4})
    assert not jsonschema.Draft202012Validator(schema).is_valid({"amount": 2, "extra": 1})


def test_mapping_form_and_optional_parameters():
    doc = {"transition": {"actions": [{"name": "say", "params": {
        "text": "What to say.", "volume": {"type": "number", "range": [0, 1], "optional": True}}}]}}
    [action] = actions(doc)
    assert [p.name for p in action.params] == ["text", "volume"]
    [tool] = _tools(doc)
    assert tool["parameters"]["required"] == ["text"]
    assert tool["parameters"]["properties"]["text"]["description"] == "What to say."


def test_action_space_text_lists_every_action_with_its_parameters_and_the_format():
    text = _text(VAULT)
    assert "- move(direction): Walk one cell; costs one unit of oil." in text
    assert 'direction: string, one of "north", "south", "east", "west". Where to walk.' in text
    assert "amount: integer, from 1 to 3 inclusive. How much to trim." in text
    assert "- wait()" in text
    assert 'Example: {"action": "move", "params": {"direction": "north"}}' in text


def test_malformed_actions_are_skipped_not_guessed():
    assert _tools({"transition": {"actions": [5, {"params": ["x"]}, {"name": "ok"}]}})[0]["name"] == "ok"
    assert _tools({"transition": "nothing"}) == [] and _tools(None) == []
