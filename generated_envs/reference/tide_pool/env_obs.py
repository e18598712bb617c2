"""What the tide-pool explorer sees: a 3x3 window of the map as it is *now*.

The level stores raw heights; the window must show the tide and the shells too, so the map is
drawn first and the runtime's egocentric crop is applied to the drawing.
"""
from __future__ import annotations

from typing import Any

from pipeline.runtime import EgocentricCrop


def draw_map(state: dict[str, Any]) -> list[str]:
    """Heights as digits, ~ where flooded, * where a shell lies, @ for the explorer."""
    level = state["tide"]["level"]
    rows = [["~" if int(h) <= level else h for h in row] for row in state["terrain"]]
    for x, y in state["shells"]:
        if rows[y][x] != "~":
            rows[y][x] = "*"
    x, y = state["agent"]["pos"]
    rows[y][x] = "@"
    return ["".join(row) for row in rows]


def status(state: dict[str, Any]) -> str:
    if not state["game"]["over"]:
        return "exploring"
    x, y = state["agent"]["pos"]
    flooded = int(state["terrain"][y][x]) <= state["tide"]["level"]
    return "swept away by the tide" if flooded else "safe on high ground at the peak"


class TideWindow(EgocentricCrop):
    def view(self, env_state: dict[str, Any], t: int) -> dict[str, Any]:
        # The crop reads the grid at params.grid; hand it the drawing instead of raw heights.
        drawn = {**env_state, self.grid_path: draw_map(env_state)}
        x, y = env_state["agent"]["pos"]
        return {
            **super().view(drawn, t),
            "height_here": int(env_state["terrain"][y][x]),
            "status": status(env_state),
        }
