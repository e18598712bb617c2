"""The action set of many grid worlds, read once: `move` with a `direction` (north, south, east,
west; north is up) and `wait`. An environment that declares these actions in config.yaml reads
an agent's action with `read_move` and keeps only its own consequences of a move."""
from __future__ import annotations

from typing import Any

DIRECTIONS = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
VALID_MOVES = "valid actions: move with direction north/south/east/west, or wait"


def read_move(action: Any) -> tuple[str | None, str]:
    """("wait", "") for wait, (direction, "") for a valid move, else (None, why it is invalid)."""
    name = action.get("action") if isinstance(action, dict) else None
    params = action.get("params") if isinstance(action, dict) else None
    if name == "wait":
        return "wait", ""
    if name != "move":
        return None, f"unknown action {name!r}; {VALID_MOVES}"
    direction = params.get("direction") if isinstance(params, dict) else None
    if direction not in DIRECTIONS:
        return None, f"move needs params.direction in north/south/east/west, got {direction!r}"
    return direction, ""
