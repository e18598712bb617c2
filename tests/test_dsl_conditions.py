"""The condition syntax: parsed without eval, evaluated against a state dict."""
import pytest

from envforge.dsl_schema.conditions import (
    ConditionError,
    ConditionSyntaxError,
    Path,
    evaluate,
    holds,
    parse_condition,
    paths,
)

STATE = {"game": {"game_over": False, "winner": 2, "moves": [3, 4]}, "agent": {"pos": [1, 2], "hp": 0, "name": "ada"}}


@pytest.mark.parametrize("text,expected", [
    ("game.game_over == true", False),
    ("game.winner != 0", True),
    ("game.winner == 2 and not game.game_over", True),
    ("game.game_over or agent.hp <= 0", True),
    ("len(game.moves) >= 2", True),
    ("agent.pos == [1, 2]", True),
    ("agent.pos[0] + agent.pos[1] == 3", True),
    ("3 in game.moves", True),
    ("'x' not in agent.name", True),
    ("0 < game.winner < 3", True),
    ("t >= max_steps - 1", True),
    ("-agent.hp == 0 and (game.winner % 2 == 0)", True),
    ("agent.name == 'ada' and game.game_over == null", False),
])
def test_evaluates_conditions_against_a_state(text, expected):
    assert holds(text, STATE, names={"t": 9, "max_steps": 10}) is expected


@pytest.mark.parametrize("text", [
    "game.over = true", "a && b", "__import__('os').system('ls')", "game.winner is 0",
    "lambda: 1", "[x for x in y]", "a.b()", "'abc'.upper", "a[b]", "", "   ", "1 +", "x" * 1001, "a if b else c",
])
def test_rejects_text_outside_the_grammar(text):
    with pytest.raises(ConditionSyntaxError):
        parse_condition(text)


def test_syntax_errors_name_the_column():
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition("game.over = true")
    assert info.value.column == 11


def test_deep_nesting_is_a_syntax_error_not_a_crash():
    with pytest.raises(ConditionSyntaxError):
        parse_condition("-" * 999 + "1")


def test_missing_path_is_a_condition_error():
    with pytest.raises(ConditionError, match="game.loser"):
        evaluate("game.loser == 1", STATE)


def test_type_errors_are_condition_errors():
    with pytest.raises(ConditionError):
        evaluate("agent.name < 3", STATE)
    with pytest.raises(ConditionError):
        evaluate("len(agent.hp) == 0", STATE)


def test_paths_lists_what_a_condition_reads():
    assert list(paths(parse_condition("len(a.b) > c[0] and not d"))) == [Path(("a", "b")), Path(("c", 0)), Path(("d",))]


def test_true_false_null_are_literals_not_paths():
    assert list(paths(parse_condition("true and false != null"))) == []
