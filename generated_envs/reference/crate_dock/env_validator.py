"""Level checks for crate_dock: structure, then solvability by breadth-first search.

The search plays env_main.apply_action itself, so "solvable" means solvable under the rules
the agent actually meets, not under a re-implementation of them.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import yaml

from pipeline.runtime import event_rewards
from env_main import DIRECTIONS, apply_action

CONFIG = yaml.safe_load((Path(__file__).with_name("config.yaml")).read_text(encoding="utf-8"))
MAX_STEPS = int(CONFIG["termination"]["max_steps"])


def solve(state: dict[str, Any], max_moves: int = MAX_STEPS) -> list[str] | None:
    """Shortest list of directions that docks every crate, or None if none fits in max_moves."""
    def key(s):
        return tuple(s["agent"]["pos"]), tuple(sorted(map(tuple, s["crates"])))

    seen, queue = {key(state)}, deque([(state, [])])
    while queue:
        current, path = queue.popleft()
        if current["game"]["solved"]:
            return path
        if len(path) == max_moves:
            continue
        for direction in DIRECTIONS:
            nxt, _, _ = apply_action(current, {"action": "move", "params": {"direction": direction}})
            if key(nxt) not in seen:
                seen.add(key(nxt))
                queue.append((nxt, path + [direction]))
    return None


def structure_issues(state: dict[str, Any]) -> list[str]:
    grid = state.get("grid")
    if not (isinstance(grid, list) and len(grid) >= 3 and all(isinstance(r, str) for r in grid)):
        return [f"grid: expected a list of at least 3 strings, found {grid!r}"]
    issues = []
    width = len(grid[0])
    if any(len(row) != width for row in grid):
        issues.append("grid: rows differ in length")
    if any(set(row) - set("#.o") for row in grid):
        issues.append("grid: only '#', '.' and 'o' are allowed (crates and agent live outside it)")
    border = grid[0] + grid[-1] + "".join(row[0] + row[-1] for row in grid)
    if set(border) != {"#"}:
        issues.append("grid: the border must be all wall '#'")
    if issues:
        return issues

    def free(p):
        return isinstance(p, list) and len(p) == 2 and 0 < p[0] < width - 1 and 0 < p[1] < len(grid) - 1 \
            and grid[p[1]][p[0]] != "#"

    crates, docks = state.get("crates", []), sum(row.count("o") for row in grid)
    agent = state.get("agent", {}).get("pos")
    if not crates or not all(free(c) for c in crates):
        issues.append(f"crates: expected one or more [x, y] on floor or dock tiles, found {crates!r}")
    elif len({tuple(c) for c in crates}) != len(crates):
        issues.append("crates: two crates share a tile")
    if docks != len(crates):
        issues.append(f"grid: {docks} docks for {len(crates)} crates; expected one dock per crate")
    if not free(agent) or agent in crates:
        issues.append(f"agent.pos: expected a free floor tile, found {agent!r}")
    if state.get("game", {}).get("solved") is not False:
        issues.append("game.solved: a level must start unsolved (false)")
    return issues


def validate_level(state: dict[str, Any]) -> tuple[bool, list[str]]:
    issues = structure_issues(state)
    if issues:
        return False, issues
    if all(state["grid"][y][x] == "o" for x, y in state["crates"]):
        return False, ["crates: every crate already starts on a dock"]
    if solve(state) is None:
        return False, [f"unsolvable: no sequence of at most {MAX_STEPS} moves docks every crate"]
    return True, []


def max_reward(state: dict[str, Any]) -> float:
    """Binary reward: the solve reward if the level can be solved in time, else 0."""
    return event_rewards(CONFIG)["all_crates_docked"] if solve(state) is not None else 0.0
