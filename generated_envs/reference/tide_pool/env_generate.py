"""Level generator for tide_pool: a noisy hill rising out of the pool, shells on its flanks."""
from __future__ import annotations

import random
from typing import Any

from env_validator import validate_level

ATTEMPTS = 200


def _draw(rng: random.Random, p: dict[str, Any], tide: dict[str, Any]) -> dict[str, Any]:
    size, top = int(p["size"]), int(p["hilltop_height"])
    hx, hy = rng.randrange(size), rng.randrange(size)
    terrain = [
        "".join(str(min(9, max(0, top - abs(x - hx) - abs(y - hy) + rng.choice((-1, 0, 0, 1)))))
                for x in range(size))
        for y in range(size)
    ]
    tiles = [[x, y] for y in range(size) for x in range(size)]
    rng.shuffle(tiles)
    lo, hi = p["start_height"]
    start = next((t for t in tiles if lo <= int(terrain[t[1]][t[0]]) <= hi), tiles[0])
    lo, hi = p["shell_height"]
    flanks = [t for t in tiles if t != start and lo <= int(terrain[t[1]][t[0]]) <= hi]
    return {
        "terrain": terrain,
        "shells": flanks[:rng.randint(*p["shells"])],
        "agent": {"pos": start, "shells": 0},
        "tide": dict(tide),
        "game": {"over": False},
    }


def generate_level(seed: int, config: dict[str, Any]) -> dict[str, Any]:
    """The full initial state for `seed`; the same seed always gives the same level."""
    p = config["generator"]["randomization"]["parameters"]
    tide = config["state_template"]["tide"]
    # A private Random: the global one may be touched by anything else in the process.
    rng = random.Random(seed)
    for _ in range(ATTEMPTS):
        state = _draw(rng, p, tide)
        if validate_level(state)[0]:
            return state
    raise RuntimeError(f"seed {seed}: no valid level in {ATTEMPTS} draws; loosen generator parameters")
