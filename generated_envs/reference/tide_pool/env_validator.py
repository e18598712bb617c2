"""Level checks for tide_pool: structure, then what is achievable, by exhaustive search.

The search plays env_main.apply_action over every action sequence, merging sequences that
reach the same (position, shells left) at the same step; the tide depends only on the step,
so that pair is the whole state. It is exact and small: 7x7 tiles x 2^shells x 25 steps.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.runtime import event_rewards
from env_main import DIRECTIONS, apply_action, height

CONFIG = yaml.safe_load((Path(__file__).with_name("config.yaml")).read_text(encoding="utf-8"))
MAX_STEPS = int(CONFIG["termination"]["max_steps"])
REWARDS = event_rewards(CONFIG)
ACTIONS = [{"action": "move", "params": {"direction": d}} for d in DIRECTIONS] + [{"action": "wait", "params": {}}]


def search(state: dict[str, Any], max_steps: int = MAX_STEPS) -> tuple[float, bool]:
    """(best total reward, whether the explorer can still be standing when the tide peaks)."""
    frontier = {None: (state, 0.0)}
    best, survivable = 0.0, False
    for _ in range(max_steps):
        layer = {}
        for current, gained in frontier.values():
            for action in ACTIONS:
                nxt, events, _ = apply_action(current, action)
                total = gained + sum(REWARDS.get(e, 0.0) for e in events)
                best = max(best, total)
                if nxt["game"]["over"]:
                    survivable |= "safe_at_peak" in events
                    continue
                layer[(tuple(nxt["agent"]["pos"]), tuple(map(tuple, nxt["shells"])))] = (nxt, total)
        frontier = layer
    return best, survivable


def structure_issues(state: dict[str, Any]) -> list[str]:
    terrain = state.get("terrain")
    if not (isinstance(terrain, list) and terrain and all(isinstance(r, str) for r in terrain)):
        return [f"terrain: expected a list of strings of height digits, found {terrain!r}"]
    if any(len(r) != len(terrain[0]) or not r.isdigit() for r in terrain):
        return ["terrain: rows must be equally long and hold only the digits 0-9"]
    tide = state.get("tide", {})
    if not all(isinstance(tide.get(k), int) for k in ("level", "peak", "rise_every", "next_rise_in")):
        return [f"tide: expected integers level, peak, rise_every, next_rise_in, found {tide!r}"]

    def dry(p):
        return isinstance(p, list) and len(p) == 2 and 0 <= p[1] < len(terrain) and 0 <= p[0] < len(terrain[0]) \
            and height(state, p) > tide["level"]

    issues = []
    pos, shells = state.get("agent", {}).get("pos"), state.get("shells", [])
    if not dry(pos):
        issues.append(f"agent.pos: expected a dry tile inside the terrain, found {pos!r}")
    if not shells or not all(dry(s) for s in shells) or len({tuple(s) for s in shells}) != len(shells):
        issues.append(f"shells: expected distinct [x, y] on dry tiles, found {shells!r}")
    elif pos in shells:
        issues.append("shells: a shell lies on the start tile")
    if state.get("agent", {}).get("shells") != 0 or state.get("game", {}).get("over") is not False:
        issues.append("agent.shells must start at 0 and game.over at false")
    if not 0 <= tide["level"] < tide["peak"] or not 1 <= tide["next_rise_in"] <= tide["rise_every"]:
        issues.append(f"tide: expected 0 <= level < peak and 1 <= next_rise_in <= rise_every, found {tide!r}")
    elif tide["next_rise_in"] + (tide["peak"] - tide["level"] - 1) * tide["rise_every"] > MAX_STEPS:
        issues.append(f"tide: it would peak after max_steps ({MAX_STEPS}), so the peak bonus is out of reach")
    return issues


def validate_level(state: dict[str, Any]) -> tuple[bool, list[str]]:
    issues = structure_issues(state)
    if issues:
        return False, issues
    best, survivable = search(state)
    if not survivable:
        issues.append("unsolvable: no route keeps the explorer dry until the tide peaks")
    if best < REWARDS["safe_at_peak"] + REWARDS["shell_collected"]:
        issues.append(f"too poor: the best run earns {best}, less than one shell plus the peak bonus")
    return not issues, issues


def max_reward(state: dict[str, Any]) -> float:
    """The exact best total reward of the level (every shell reachable in time, plus survival)."""
    return search(state)[0]
