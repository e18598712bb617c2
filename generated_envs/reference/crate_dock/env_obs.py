"""What the agent of crate_dock sees: everything, with the board drawn for it.

The level stores the static grid apart from the moving pieces; an agent should not have to
overlay coordinates on a map in its head, so the observation carries the composed board.
"""
from __future__ import annotations

from typing import Any

from pipeline.runtime import ObservationPolicy


def draw_board(state: dict[str, Any]) -> list[str]:
    """The grid with crates ($, * on a dock) and the agent (@, + on a dock) drawn in."""
    rows = [list(row) for row in state["grid"]]
    for x, y in state["crates"]:
        rows[y][x] = "*" if rows[y][x] == "o" else "$"
    x, y = state["agent"]["pos"]
    rows[y][x] = "+" if rows[y][x] == "o" else "@"
    return ["".join(row) for row in rows]


class DockBoard(ObservationPolicy):
    """Full observation: the exposed paths plus the board and counts the skin shows."""

    def view(self, env_state: dict[str, Any], t: int) -> dict[str, Any]:
        board = draw_board(env_state)
        return {
            "board": board,
            "crates_on_docks": sum(row.count("*") for row in board),
            "crate_count": len(env_state["crates"]),
            "status": "SOLVED" if env_state["game"]["solved"] else "in progress",
        }
