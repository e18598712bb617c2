"""Search over snapshots: the model-free skilled agent, and what the DSL tells it.

The search itself runs inside the sandbox worker, next to the environment (`EnvClient.search`,
pipeline/sandbox/inside/search.py): best-first or breadth-first over in-process snapshots, states
merged by their canonical hash, its budget counted in nodes. Over IPC it would cost a round trip
per node; in the worker it steps thousands of nodes a second. It returns the best total reward it
reached and the action sequence that reaches it (the witness), so a reported maximum can be
replayed through ordinary `step` calls and checked (`replay`).

`search` is the one way envforge asks for a plan: verify's certification, its planner episode,
the planner agent (`evaluate --agent planner`), probe's plan tests and reskin's identity check
all call it, so all of them steer toward the DSL's end conditions (`end_goals`) and bound and
prune with the DSL's reward bound (`reward_bound`).
"""
from __future__ import annotations

import math
import re

from envforge.pipeline.envfolder import values as param_values
from envforge.pipeline.sandbox.outside.client import EnvClient, SearchResult

__all__ = ["SearchResult", "candidates", "end_goals", "level_values", "replay", "reward_bound", "search"]


def candidates(space, env: EnvClient) -> list[dict]:
    """The actions a search from the env's current state tries: the one action space
    (ActionSpace) on that state, so an untyped parameter without other evidence takes the
    values the state holds under its name (ActionSpace.for_state), and a parameter not
    enumerated whole the numbers, names and scales the state gives (envfolder/values.py)."""
    on_level, values = level_values(space, env)
    return on_level.candidates(values)


def level_values(space, env: EnvClient) -> tuple:
    """(the action space on the env's current state, (action, parameter) -> the values a search there tries)."""
    state = env.observe(want_state=True).state
    on_level = space.for_state(state)
    return on_level, param_values.level_values(on_level, state)


def search(env: EnvClient, spec, *, max_nodes: int, seconds: float, actions: list[dict] | None = None,
           max_steps: int | None = None, stop_at: float | None = None, order: str = "best",
           time_in_key: bool = False, bound: bool = True, floor: float | None = None) -> SearchResult:
    """Search from `env`'s current state with the DSL of `spec` (an EnvSpec): its end conditions
    steer best-first (`end_goals`), its reward bound stops and prunes it (`reward_bound`; checked
    on every step, dropped on the first that breaks it). `actions`: the candidates (default: the
    action space on the current state); `floor`: a total already reached, which a pruned branch
    must be unable to beat. The rest as `EnvClient.search`."""
    config = spec.config
    return env.search(candidates(spec.actions, env) if actions is None else actions, max_steps,
                      max_nodes=max_nodes, seconds=seconds, time_in_key=time_in_key, stop_at=stop_at, order=order,
                      bound=reward_bound(config) if bound else None, goals=end_goals(config), floor=floor)


def replay(env: EnvClient, actions: list[dict]) -> tuple[float, bool, int]:
    """Play `actions` from the current state through ordinary steps:
    (total reward, whether the episode ended, steps taken). Stops early if it ends."""
    total, steps = 0.0, 0
    for action in actions:
        out = env.step(action)
        total += out.reward
        steps += 1
        if out.done:
            return total, True, steps
    return total, False, steps


def reward_bound(config: dict) -> dict | None:
    """The reward bound the DSL declares, as the search takes it, or None (no positive value):
    {"values": every number of config.yaml's `reward` section (event values, value tables,
    conditions) but `default_reward`, "step": the largest of them, "once": whether it is the only
    positive one (a binary reward)}.

    The hypothesis: every step pays one of `values` (or 0), and, when `once`, a step paying `step`
    ends the episode. Then the reward still to come from a state `d` steps before the cap is at
    most `step` when `once`, else `d` x `step` (the step cap); a level's max is at most that from
    the start (`bound_total`). The search checks the hypothesis on every step it takes and drops
    the bound on the first step that breaks it (pipeline/sandbox/inside/search.py). Numbers of the
    section that are no rewards (a threshold) only loosen the bound: every step is checked
    against the values, never trusted to pay one."""
    section = (config or {}).get("reward") if isinstance(config, dict) else None
    values: list[float] = []

    def collect(node, depth=0):
        if isinstance(node, bool) or depth > 6:
            return
        if isinstance(node, (int, float)) and math.isfinite(node):
            values.append(float(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                if key not in ("default_reward",):
                    collect(value, depth + 1)
        elif isinstance(node, list):
            for value in node:
                collect(value, depth + 1)

    collect(section)
    positive = {v for v in values if v > 0}
    if not positive:
        return None
    return {"values": sorted(set(values)), "step": max(positive), "once": len(positive) == 1}


def bound_total(bound: dict, steps: int) -> float:
    """What `reward_bound`'s hypothesis allows an episode of `steps` steps at most."""
    return bound["step"] if bound["once"] else bound["step"] * max(0, steps)


def bound_text(bound: dict, steps: int) -> str:
    """How the bound was derived, in words."""
    if bound["once"]:
        return (f"the DSL declares a binary reward of {bound['step']:g} (every step of the search paid a declared "
                f"value, and the paying step ended the episode)")
    return (f"the DSL declares step rewards of at most {bound['step']:g} (every step of the search paid one of "
            f"its values) over {steps} steps: {bound_total(bound, steps):g}")


_EQUAL_PATHS = re.compile(r"^\s*([A-Za-z_]\w*(?:\.\w+)*)\s*==\s*([A-Za-z_]\w*(?:\.\w+)*)\s*$")
_LITERALS = {"true", "false", "True", "False", "none", "None", "null"}


def end_goals(config: dict) -> list[list[str]]:
    """The DSL's end conditions that say two parts of the state are equal (`board.grid ==
    targets.chaos_pattern`), as pairs of dotted paths: best-first steers toward the nearest one
    (pipeline/sandbox/inside/search.py), an order only, never a proof."""
    termination = (config or {}).get("termination") if isinstance(config, dict) else None
    conditions = (termination.get("conditions") if isinstance(termination, dict) else None) or []
    out = []
    for condition in conditions if isinstance(conditions, list) else []:
        found = _EQUAL_PATHS.match(condition) if isinstance(condition, str) else None
        if found and not {found.group(1), found.group(2)} & _LITERALS:
            out.append([found.group(1), found.group(2)])
    return out
