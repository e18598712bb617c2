"""Observation policies: the ObsEnv layer's library, configurable from the DSL.

A policy maps (true state, t) to the semantic observation omega, a flat dict.
Exposed state paths become keys with dots replaced by underscores
("agent.pos" -> "agent_pos"); "t" is always present.

Grid policies read a grid (list of strings or list of lists, indexed grid[y][x]) and a
position [x, y] from the state, and replace hidden cells with `hidden` (default "?").
DSL: observation: {policy: NAME, params: {...}, expose: [paths]}.
"""
from __future__ import annotations

import copy
import random
from typing import Any

RESERVED = {"t"}


def get_path(state: Any, path: str) -> Any:
    node = state
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(f"state path '{path}': no '{part}'")
    return node


def expose_key(path: str) -> str:
    return path.replace(".", "_")


class ObservationPolicy:
    """Base class (AutoEnv's `base.env.base_observation.ObservationPolicy`)."""

    def __init__(self, expose: list[str] | None = None, **params: Any):
        self.expose = list(expose or [])
        self.params = params

    def __call__(self, env_state: dict[str, Any], t: int) -> dict[str, Any]:
        omega = self.exposed(env_state)
        omega.update(self.view(env_state, t))
        omega["t"] = t
        return omega

    def exposed(self, env_state: dict[str, Any]) -> dict[str, Any]:
        return {expose_key(p): copy.deepcopy(get_path(env_state, p)) for p in self.expose if p not in RESERVED}

    def view(self, env_state: dict[str, Any], t: int) -> dict[str, Any]:
        return {}


class FullObservation(ObservationPolicy):
    """Everything: the exposed paths, or the whole state when none are listed."""

    def view(self, env_state, t):
        return {} if self.expose else copy.deepcopy(env_state)


class _GridPolicy(ObservationPolicy):
    """Common parameters of the grid policies: grid, position, radius, hidden, key."""

    def __init__(self, expose=None, grid="grid", position="agent.pos", radius=2, hidden="?",
                 key="view", **params):
        super().__init__(expose, **params)
        self.grid_path, self.pos_path = grid, position
        self.radius, self.hidden, self.key = int(radius), hidden, key

    def view(self, env_state, t):
        grid = get_path(env_state, self.grid_path)
        x, y = get_path(env_state, self.pos_path)[:2]
        rows = [list(r) for r in grid]
        cells = self.cells(rows, int(x), int(y), t)
        as_text = bool(grid) and isinstance(grid[0], str)
        return {self.key: ["".join(map(str, r)) for r in cells] if as_text else cells}

    def cells(self, rows, x, y, t):
        raise NotImplementedError

    def _mask(self, rows, visible):
        return [[c if visible(cx, cy) else self.hidden for cx, c in enumerate(r)] for cy, r in enumerate(rows)]


class RadiusObservation(_GridPolicy):
    """The whole grid, with cells farther than `radius` (Chebyshev) from the agent hidden."""

    def cells(self, rows, x, y, t):
        return self._mask(rows, lambda cx, cy: max(abs(cx - x), abs(cy - y)) <= self.radius)


class EgocentricCrop(_GridPolicy):
    """A (2r+1)x(2r+1) window centred on the agent; outside the grid shows `outside`."""

    def __init__(self, expose=None, outside="#", **params):
        super().__init__(expose, **params)
        self.outside = outside

    def cells(self, rows, x, y, t):
        r = self.radius
        h = len(rows)
        return [
            [rows[cy][cx] if 0 <= cy < h and 0 <= cx < len(rows[cy]) else self.outside
             for cx in range(x - r, x + r + 1)]
            for cy in range(y - r, y + r + 1)
        ]


class LineOfSight(_GridPolicy):
    """Cells within `radius` whose straight line from the agent crosses no `opaque` cell."""

    def __init__(self, expose=None, opaque=("#",), **params):
        super().__init__(expose, **params)
        self.opaque = set(opaque)

    def cells(self, rows, x, y, t):
        def visible(cx, cy):
            if max(abs(cx - x), abs(cy - y)) > self.radius:
                return False
            return all(rows[py][px] not in self.opaque for px, py in _line(x, y, cx, cy)[1:-1])
        return self._mask(rows, visible)


class RandomMask(_GridPolicy):
    """Each cell hidden with probability `p`, drawn from (seed, t): the same step shows the same mask."""

    def __init__(self, expose=None, p=0.3, seed=0, **params):
        super().__init__(expose, **params)
        self.p, self.seed = float(p), int(seed)

    def cells(self, rows, x, y, t):
        rng = random.Random(f"{self.seed}:{t}")
        return self._mask(rows, lambda cx, cy: (cx, cy) == (x, y) or rng.random() >= self.p)


def _line(x0, y0, x1, y1):
    """Bresenham's line from (x0, y0) to (x1, y1), both ends included."""
    points = []
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        points.append((x0, y0))
        if (x0, y0) == (x1, y1):
            return points
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


POLICIES = {
    "full": FullObservation,
    "radius": RadiusObservation,
    "egocentric": EgocentricCrop,
    "egocentric_crop": EgocentricCrop,
    "line_of_sight": LineOfSight,
    "random_mask": RandomMask,
}


def policy_from_config(observation: dict[str, Any] | None,
                       cls: type[ObservationPolicy] | None = None) -> ObservationPolicy:
    """Build the policy of a DSL `observation` section: `cls` (an environment's own policy class)
    with the section's expose and params, else the runtime policy the section names.

    Unknown policy names (the paper's own examples use free names such as "full_board")
    fall back to the full observation of the exposed paths.
    """
    observation = observation or {}
    cls = cls or POLICIES.get(str(observation.get("policy", "full")), FullObservation)
    return cls(expose=observation.get("expose"), **(observation.get("params") or {}))
