"""The agent loop's limits and stop reasons, and the ReAct action parser, without a sandbox or a model."""
from __future__ import annotations

import asyncio

import pytest

from envforge.dsl_schema.actions import Action, Param
from envforge.pipeline.envfolder.actions import ActionSpace
from envforge.pipeline.evaluate.episode import Decision, Limits, Tracker, run_episode
from envforge.pipeline.evaluate.react import FormatError, parse_action, thought_of
from envforge.pipeline.kinds import normalize
from envforge.pipeline.sandbox.outside.client import Observation, StepResult

SPACE = [Action("move", "", (Param("direction", "string", ("north", "south")),)), Action("wait", "", ())]
NORTH = {"action": "move", "params": {"direction": "north"}}
WAIT = {"action": "wait", "params": {}}


class Corridor:
    """A fake session: position on a line; north moves up, anything else stays; done at 5, reward 1 there."""

    def __init__(self, length: int = 5, reward_every_step: bool = False):
        self.pos, self.t, self.length, self.reward_every_step = 0, 0, length, reward_every_step

    async def reset(self, level):
        return Observation("at 0", "0")

    async def step(self, action):
        self.t += 1
        if action == NORTH:
            self.pos += 1
        done = self.pos >= self.length
        return StepResult(
            f"at {self.pos}",
            str(self.pos),
            self.t,
            reward=1.0 if done or self.reward_every_step else 0.0,
            terminated=done,
            last_action_result="ok",
        )


class Scripted:
    def __init__(self, *decisions):
        self.decisions = list(decisions)

    async def act(self, turn):
        return self.decisions.pop(0) if len(self.decisions) > 1 else self.decisions[0]


def episode(agent, limits=Limits(), max_steps=30, max_reward=1.0, session=None):
    tracker = Tracker(limits, max_steps, max_reward, ActionSpace(tuple(SPACE)))
    return asyncio.run(run_episode(agent, session or Corridor(), "levels/level_01.yaml", tracker))


def test_reaching_the_max_reward_is_solved():
    t = episode(Scripted(Decision(action=NORTH)))
    assert (t.stop_reason, t.turns, t.total) == ("solved", 5, 1.0)


def test_the_environment_ending_the_episode_is_recorded_as_terminated():
    t = episode(Scripted(Decision(action=NORTH)))
    record = t.record(env="e", level="levels/level_01.yaml", run=0, agent="a", model="-", split="test")
    assert (record.stop_reason, record.terminated, record.truncated) == ("solved", True, False)


def test_an_agent_stopping_at_the_certified_max_is_solved_not_stopped():
    # The planner agent stops when its witness is played out; at the level's max that is a solve.
    t = episode(Scripted(Decision(action=NORTH), Decision(action=NORTH), Decision(error="stop", message="done")),
                max_reward=2.0, session=Corridor(reward_every_step=True))
    assert (t.stop_reason, t.turns, t.total, t.terminated) == ("solved", 3, 2.0, False)


def test_the_turn_cap_is_recorded_as_truncated():
    t = episode(Scripted(Decision(action=WAIT)), Limits(loop_visits=0, stagnation_steps=0), max_steps=4)
    record = t.record(env="e", level="levels/level_01.yaml", run=0, agent="a", model="-", split="test")
    assert (record.stop_reason, record.steps, record.terminated, record.truncated) == ("max_steps", 4, False, True)


def test_an_agent_that_waits_in_place_is_stopped_as_a_loop():
    t = episode(Scripted(Decision(action=WAIT)), Limits(loop_visits=4, stagnation_steps=0))
    assert (t.stop_reason, t.turns) == ("loop_detected", 3)  # start + 3 returns = 4 visits


def test_no_new_state_and_no_reward_for_n_steps_is_stagnation():
    t = episode(Scripted(Decision(action=NORTH), Decision(action=NORTH), *[Decision(action=WAIT)] * 3),
                Limits(loop_visits=0, stagnation_steps=3))
    assert (t.stop_reason, t.turns) == ("stagnation", 5)


def test_invalid_actions_in_a_row_end_the_episode_and_are_not_loops():
    bad = Decision(action={"action": "move", "params": {"direction": "up"}})
    t = episode(Scripted(bad), Limits(invalid_action_streak=3, loop_visits=2))
    assert (t.stop_reason, t.validity.invalid, t.validity.error_streaks, t.validity.recovered) == (
        "invalid_action_streak", 3, 1, 0)


def test_format_errors_use_up_steps_without_touching_the_environment():
    session = Corridor()
    t = episode(Scripted(Decision(error="format", message="no action")), Limits(format_error_streak=0),
                max_steps=7, session=session)
    assert (t.stop_reason, t.turns, t.env_steps, session.t) == ("max_steps", 7, 0, 0)


def test_a_valid_action_after_errors_is_a_recovery():
    t = episode(Scripted(Decision(error="format"), Decision(action={"action": "fly", "params": {}}),
                         Decision(action=NORTH), Decision(error="format"), Decision(action=NORTH)))
    assert (t.validity.error_streaks, t.validity.recovered) == (2, 2)
    record = t.record(env="e", level="levels/level_01.yaml", run=0, agent="a", model="-", split="test")
    assert record.recovery_rate == 1.0 and record.format_errors == 2 and record.invalid_actions == 1


@pytest.mark.parametrize("error, reason", [("model", "model_error"), ("budget", "budget"), ("stop", "agent_stopped")])
def test_a_turn_that_cannot_go_on_ends_the_episode_at_once(error, reason):
    t = episode(Scripted(Decision(action=NORTH), Decision(error=error, message="why")))
    assert (t.stop_reason, t.stop_detail, t.turns) == (reason, "why", 2)


def test_an_action_the_environment_reports_invalid_by_an_event_counts_as_invalid():
    """The environment's own event name says the action was invalid (crate_dock's "invalid_action"),
    though it fits the declared space: counted invalid, its turn logged with why."""
    class Walls(Corridor):
        async def step(self, action):
            out = await super().step(action)
            out.events = ["Invalid_Position"] if action == WAIT else ["moved"]
            return out

    t = episode(Scripted(Decision(action=WAIT), Decision(action=NORTH)), session=Walls())
    assert (t.validity.invalid, t.turn_log[0]["invalid"], t.turn_log[1]["invalid"]) == (
        1, "the environment reported 'Invalid_Position'", None)
    assert ActionSpace(tuple(SPACE)).sent_invalid(WAIT, ["invalid_action"]) == \
        "the environment reported 'invalid_action'"
    assert ActionSpace(tuple(SPACE)).sent_invalid({"action": "fly", "params": {}}, []) == "unknown action 'fly'"


def test_invalid_reason_checks_names_parameters_and_enums():
    assert ActionSpace(tuple(SPACE)).invalid_reason(NORTH) is None
    assert ActionSpace(tuple(SPACE)).invalid_reason({"action": "fly", "params": {}}) == "unknown action 'fly'"
    assert (
        ActionSpace(tuple(SPACE)).invalid_reason({"action": "move", "params": {}}) == "move needs parameter 'direction'"
    )
    assert (
        ActionSpace(tuple(SPACE)).invalid_reason({"action": "wait", "params": {"x": 1}}) == "wait has no parameter 'x'"
    )
    assert "must be one of ['north', 'south']" in ActionSpace(tuple(SPACE)).invalid_reason(
        {"action": "move", "params": {"direction": "up"}}
    )
    assert (
        ActionSpace(tuple([])).invalid_reason({"action": "anything", "params": {}}) is None
    )  # nothing declared: the env decides


@pytest.mark.parametrize("reply", [
    '<thinking_memory>go</thinking_memory><action>{"action": "move", "params": {"direction": "north"}}</action>',
    "<action>\n```json\n{\"action\": \"move\", \"params\": {\"direction\": \"north\"}}\n```\n</action> Done.",
    "<action>{'action': 'move', 'params': {'direction': 'north'},}</action>",
    "Sure! <action>{\"action\": \"move\", \"direction\": \"north\"}</action> hope that helps {not json}",
    "<action>{'action': 'move', 'params': {'direction': 'north'}}",  # never closed
    "I'll go north.\n```json\n{\"action\": \"move\", \"params\": {\"direction\": \"north\"}}\n```",  # no tags
])
def test_parse_action_tolerates_fences_python_quoting_and_prose(reply):
    assert parse_action(reply) == NORTH


def test_parse_action_takes_the_last_action_block_and_json_literals_in_python_quotes():
    reply = "<action>{'action': 'wait'}</action> no wait: <action>{'action': 'move', 'params': {'run': true}}</action>"
    assert parse_action(reply) == {"action": "move", "params": {"run": True}}
    assert parse_action('<action>{"action": "say", "params": {"text": "a } b"}}</action>')["params"] == {
        "text": "a } b"
    }


@pytest.mark.parametrize("reply, message", [
    ("", "found an empty reply"),
    ("I am thinking", "expected a dictionary with an \"action\" key in the reply, found 'I am thinking'"),
    ("<action>move north</action>", "inside <action></action>, found '<action>move north</action>'"),
    ("<action>{'action': 'move', 'params': 'north'}</action>", "expected params as a dictionary, found 'north'"),
    ("<action>{'action': 3}</action>", "expected the action's name as a string, found 3"),
])
def test_parse_action_says_what_it_expected_and_found(reply, message):
    with pytest.raises(FormatError) as err:
        parse_action(reply)
    assert message in str(err.value)


def test_thought_is_the_thinking_memory_or_the_text_before_the_action():
    assert thought_of("<thinking_memory> plan </thinking_memory><action>{}</action>") == "plan"
    assert thought_of("plan first\n<action>{}</action>") == "plan first"


def test_normalized_reward_is_clipped_at_one_and_never_divides_by_zero():
    assert normalize(0.5, 1.0) == (0.5, 0.5, False, "")
    assert normalize(3.0, 2.0)[:3] == (1.0, 1.5, True)
    assert normalize(1.0, None, "levels/level_03.yaml") == (
        None, None, False, "no max reward for level_03.yaml in level_max_rewards.json")
    assert normalize(1.0, 0.0, "levels/level_03.yaml")[0] is None


def test_progress_shows_the_mean_score_so_far_and_dollars():
    from envforge.pipeline.evaluate.runner import Progress

    progress = Progress("react", mode="off")
    base = episode(Scripted(Decision(action=NORTH))).record(
        env="e", level="l", run=0, agent="a", model="m", split="test"
    )
    for normalized, dollars, stop in ((1.0, 0.01, "solved"), (0.0, 0.02, "max_steps"), (None, 0.5, "model_error")):
        base.normalized, base.dollars, base.stop_reason = normalized, dollars, stop
        progress.update(base)
    assert progress.postfix() == "mean 0.500 | $0.5300"  # the failed model call costs but does not score


def test_invalid_reason_checks_json_types():
    space = [Action("jump", "", (Param("height", "integer", None, (1, 3)), Param("loud", "boolean", optional=True)))]
    assert ActionSpace(tuple(space)).invalid_reason({"action": "jump", "params": {"height": 2}}) is None
    assert (
        ActionSpace(tuple(space)).invalid_reason({"action": "jump", "params": {"height": "2"}})
        == "height must be of type integer, found '2'"
    )
    assert (
        ActionSpace(tuple(space)).invalid_reason({"action": "jump", "params": {"height": True}})
        == "height must be of type integer, found True"
    )
    assert (
        ActionSpace(tuple(space)).invalid_reason({"action": "jump", "params": {"height": 2, "loud": 1}})
        == "loud must be of type boolean, found 1"
    )
