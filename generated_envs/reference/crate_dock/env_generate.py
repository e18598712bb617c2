"""Level generator for crate_dock: random rooms, kept only when solvable but not trivial."""
from __future__ import annotations

import random
from typing import Any

from env_validator import solve, validate_level

ATTEMPTS = 2000


def _draw(rng: random.Random, size: int, inner_walls: int, crates: int) -> dict[str, Any]:
    rows = [["#"] * size] + [["#"] + ["."] * (size - 2) + ["#"] for _ in range(size - 2)] + [["#"] * size]
    interior = [[x, y] for y in range(1, size - 1) for x in range(1, size - 1)]
    cells = rng.sample(interior, inner_walls + 2 * crates + 1)
    for x, y in cells[:inner_walls]:
        rows[y][x] = "#"
    for x, y in cells[inner_walls:inner_walls + crates]:
        rows[y][x] = "o"
    return {
        "grid": ["".join(row) for row in rows],
        "agent": {"pos": cells[-1]},
        "crates": cells[inner_walls + crates:-1],
        "game": {"solved": False, "pushes": 0},
    }


def generate_level(seed: int, config: dict[str, Any]) -> dict[str, Any]:
    """The full initial state for `seed`; the same seed always gives the same level."""
    p = config["generator"]["randomization"]["parameters"]
    # A private Random: the global one may be touched by anything else in the process.
    rng = random.Random(seed)
    for _ in range(ATTEMPTS):
        state = _draw(rng, int(p["size"]), rng.randint(*p["inner_walls"]), rng.choice(p["crates"]))
        solution = solve(state)
        if solution is not None and len(solution) >= int(p["min_solution_moves"]) and validate_level(state)[0]:
            return state
    raise RuntimeError(f"seed {seed}: no solvable level in {ATTEMPTS} draws; loosen generator parameters")
