"""crate_dock: push every crate onto a dock (Sokoban-lite; full observation, binary reward).

The rules are `apply_action`, a pure function of plain data: the environment applies it to
its state, and the validator's breadth-first search plays exactly the same rules.
"""
from __future__ import annotations

from typing import Any

from env_obs import DockBoard
from pipeline.runtime import DIRECTIONS, EventEnv, read_move


def apply_action(state: dict[str, Any], action: Any) -> tuple[dict[str, Any], list[str], str]:
    """One step of the rules: (next state, events, what happened). Never mutates `state`."""
    if state["game"]["solved"]:
        return state, [], "nothing happens: every crate is already docked"
    direction, invalid = read_move(action)
    if direction is None:
        return state, ["invalid_action"], invalid
    if direction == "wait":
        return state, ["waited"], "waited"
    grid, (dx, dy) = state["grid"], DIRECTIONS[direction]
    x, y = state["agent"]["pos"]
    target = [x + dx, y + dy]
    # The validator guarantees a wall border, so target and beyond never leave the grid.
    if grid[target[1]][target[0]] == "#":
        return state, ["bumped_wall"], f"blocked by a wall to the {direction}"
    crates = [list(c) for c in state["crates"]]
    events, result, pushes = ["moved"], f"moved {direction}", state["game"]["pushes"]
    if target in crates:
        beyond = [target[0] + dx, target[1] + dy]
        if grid[beyond[1]][beyond[0]] == "#" or beyond in crates:
            what = "wall" if grid[beyond[1]][beyond[0]] == "#" else "another crate"
            return state, ["push_blocked"], f"cannot push the crate {direction}: a {what} is behind it"
        crates[crates.index(target)] = beyond
        events, result, pushes = ["crate_pushed"], f"pushed a crate {direction}", pushes + 1
        if grid[target[1]][target[0]] == "o":
            events.append("crate_off_dock")
        if grid[beyond[1]][beyond[0]] == "o":
            events.append("crate_on_dock")
            result += " onto a dock"
    solved = all(grid[cy][cx] == "o" for cx, cy in crates)
    if solved:
        events.append("all_crates_docked")
        result += "; every crate is docked"
    next_state = {
        **state,
        "agent": {**state["agent"], "pos": target},
        "crates": crates,
        "game": {**state["game"], "solved": solved, "pushes": pushes},
    }
    return next_state, events, result


class CrateDockEnv(EventEnv):
    """The runtime applies `rules`, pays each event what config.yaml's reward section says, ends the
    episode when one of its termination.conditions holds and fills its skin.template."""

    rules = staticmethod(apply_action)
    observation_policy = DockBoard
