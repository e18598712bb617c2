"""tide_pool: gather shells while the tide rises, then be on high ground when it peaks.

Partial observation (a 3x3 window), accumulative reward. The rules are `apply_action`, a pure
function of plain data, so the validator's search plays exactly the rules the agent plays.
"""
from __future__ import annotations

from typing import Any

from env_obs import TideWindow
from pipeline.runtime import DIRECTIONS, EventEnv, read_move


def height(state: dict[str, Any], pos: list[int]) -> int:
    return int(state["terrain"][pos[1]][pos[0]])


def _move(state: dict[str, Any], action: Any) -> tuple[list[int], list[str], str]:
    """Where the explorer ends up, with events and a message; the tide is not handled here."""
    pos = state["agent"]["pos"]
    direction, invalid = read_move(action)
    if direction is None:
        return pos, ["invalid_action"], invalid
    if direction == "wait":
        return pos, ["waited"], "waited"
    dx, dy = DIRECTIONS[direction]
    target = [pos[0] + dx, pos[1] + dy]
    terrain = state["terrain"]
    if not (0 <= target[1] < len(terrain) and 0 <= target[0] < len(terrain[0])):
        return pos, ["bumped_edge"], f"the pool's edge blocks the way {direction}"
    if height(state, target) <= state["tide"]["level"]:
        return pos, ["blocked_by_water"], f"the tile to the {direction} is under water"
    return target, ["moved"], f"moved {direction} onto height {height(state, target)}"


def apply_action(state: dict[str, Any], action: Any) -> tuple[dict[str, Any], list[str], str]:
    """One step of the rules: (next state, events, what happened). Never mutates `state`.

    The explorer acts first, then the tide clock ticks; an invalid action still lets time pass.
    """
    if state["game"]["over"]:
        return state, [], "nothing happens: the episode is over"
    pos, events, result = _move(state, action)
    shells = [s for s in state["shells"] if s != pos]
    if len(shells) < len(state["shells"]):
        events.append("shell_collected")
        result += " and picked up a shell"

    tide = {**state["tide"], "next_rise_in": state["tide"]["next_rise_in"] - 1}
    if tide["next_rise_in"] <= 0:
        tide.update(level=tide["level"] + 1, next_rise_in=tide["rise_every"])
        events.append("tide_rose")
        result += f"; the tide rose to level {tide['level']}"
    over = False
    if height(state, pos) <= tide["level"]:
        events.append("swept_away")
        result += "; the water covered your tile and swept you away"
        over = True
    elif tide["level"] >= tide["peak"]:
        events.append("safe_at_peak")
        result += "; the tide has peaked and you are safe on high ground"
        over = True
    next_state = {
        **state,
        "shells": shells,
        "agent": {"pos": pos, "shells": state["agent"]["shells"] + len(state["shells"]) - len(shells)},
        "tide": tide,
        "game": {**state["game"], "over": over},
    }
    return next_state, events, result


class TidePoolEnv(EventEnv):
    """The runtime applies `rules`, pays each event what config.yaml's reward section says, ends the
    episode when one of its termination.conditions holds and fills its skin.template."""

    rules = staticmethod(apply_action)
    observation_policy = TideWindow
