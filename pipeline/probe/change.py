"""Change items: a changed copy of the dynamics, an action sequence, and the defect time t*.

Mutations are real changes of the rules, made in a private copy (pipeline.probe.variants):
- swap: two actions' effects trade places (`move north` does what `move south` did, and back);
- state constant: a number in the level's state that the first observation does not show
  (e.g. tide.rise_every) is one more or one less;
- config constant: a number in config.yaml's reward, termination or transition sections likewise.

t* follows WorldTest (AutumnBench C.2): playing the same actions from the same start in both, the
first step whose observation in the changed env differs from every observation the original env
produces there after the same observations so far (for stochastic dynamics, the original is played
with several seeds). A mutation visible before any action (t* would be 0) or never visible within
the tries is dropped. The agent then sees the changed env's observations step by step, T of them
with T a few steps past t*, and says when it noticed.
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Iterator

from envforge.pipeline.probe.items import ChangeItem, Start
from envforge.pipeline.probe.session import ProbeSession
from envforge.pipeline.probe.variants import select, variant_worker
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

CONFIG_SECTIONS = ("reward", "termination", "transition")


@dataclass(frozen=True)
class ChangeOptions:
    max_length: int = 20  # actions tried per sequence (at most the episode's max_steps)
    tries: int = 12  # random sequences per (mutation, level) before giving up on that level
    levels_per_mutation: int = 3  # levels where a mutation never shows before it is dropped
    tail: tuple[int, int] = (2, 10)  # steps shown after t*
    seeds: int = 3  # seeds the original env is played with (stochastic dynamics)


def make_change(session: ProbeSession, n: int, options: ChangeOptions = ChangeOptions()) -> list[ChangeItem]:
    spec, rng = session.spec, session.rng
    swaps_and_states = _swaps(spec.actions.candidates()) + _state_constants(session)
    configs = _config_constants(spec.config)
    rng.shuffle(swaps_and_states)
    rng.shuffle(configs)
    items: list[ChangeItem] = []
    failures: dict[str, int] = {}
    with variant_worker(spec.path, session.skin) as shared:
        active = [(m, shared) for m in swaps_and_states]
        opened: list = []
        try:
            for mutation in configs:  # each edits config.yaml, so each needs a copy of its own
                holder = mutated(spec.path, mutation, session.skin)
                active.append((mutation, holder.__enter__()))
                opened.append(holder)
            while len(items) < n and active:
                for mutation, worker in list(active):
                    if len(items) >= n:
                        break
                    item = _one(session, worker, mutation, len(items), options)
                    if isinstance(item, ChangeItem):
                        items.append(item)
                        failures[mutation["description"]] = 0
                        continue
                    failures[mutation["description"]] = failures.get(mutation["description"], 0) + 1
                    if item == "initial":
                        session.drop("the mutation shows before any action")
                        active.remove((mutation, worker))
                    elif failures[mutation["description"]] >= options.levels_per_mutation:
                        session.drop("the mutation never showed in the observations")
                        active.remove((mutation, worker))
        finally:
            for holder in opened:
                holder.__exit__(None, None, None)
    return items


@contextlib.contextmanager
def mutated(
    env_dir, mutation: dict, skin: str | None = None, limits: SandboxLimits | None = None
) -> Iterator[EnvClient]:
    """A worker holding the env changed by `mutation` (as a change item records it)."""
    change = {"path": mutation["path"], "value": mutation["to"]} if mutation["kind"] == "config_constant" else None
    with variant_worker(env_dir, skin, change, limits) as worker:
        select(worker, mutation.get("spec"))
        yield worker


def _one(session: ProbeSession, worker: EnvClient, mutation: dict, number: int,
         o: ChangeOptions) -> ChangeItem | str | None:
    """An item on a random level; "initial" when the mutation shows before any action; None when
    it never showed in `tries` sequences."""
    rng, spec = session.rng, session.spec
    select(worker, mutation.get("spec"))
    start = Start(rng.choice(session.levels), 0, [])
    length = min(o.max_length, spec.max_steps)
    seeds = o.seeds if session.stochastic() else 1
    for _ in range(o.tries):
        actions = _sequence(session, mutation, length)
        found = defect_time(session, worker, start, actions, seeds)
        if found == "initial":
            return found
        if found is None:
            continue
        t_star, changed, original = found
        last = min(len(changed) - 1, t_star + rng.randint(*o.tail))
        return ChangeItem(**session.item_fields("change", number, start), mutation=mutation,
                          actions=actions[:last], observations=changed[:last + 1], t_star=t_star,
                          original_at_t_star=original)
    return None


def defect_time(session: ProbeSession, worker: EnvClient, start: Start, actions: list[dict],
                seeds: int) -> tuple[int, list[str], str] | str | None:
    """(t*, the changed env's observations, the original's observation at t*); "initial" when the
    first observations differ; None when the observations never differ."""
    if session.begin(start, worker).observation != session.begin(start).observation:
        return "initial"
    changed = _observations(session, worker, start, actions)
    runs = [_observations(session, session.worker, Start(start.level, start.seed + s, start.prefix), actions)
            for s in range(seeds)]
    if changed[0] not in {run[0] for run in runs}:
        return "initial"
    matching = runs
    for t in range(1, len(changed)):
        possible = {run[t] for run in matching if len(run) > t}
        if not possible:
            return None  # the original episode had ended: nothing to compare with
        if changed[t] not in possible:
            original = next(run[t] for run in matching if len(run) > t)
            return t, changed, original
        matching = [run for run in matching if len(run) > t and run[t] == changed[t]]
    return None


def _observations(session: ProbeSession, worker: EnvClient, start: Start, actions: list[dict]) -> list[str]:
    first = session.begin(start, worker)
    return [first.observation] + [reply.observation for reply in session.play(actions, worker)]


def _sequence(session: ProbeSession, mutation: dict, length: int) -> list[dict]:
    """Random actions; for a swap, first a random number of steps without the swapped actions, so
    the change does not always show at once."""
    swap = (mutation.get("spec") or {}).get("swap")
    if not swap:
        return session.random_actions(length)
    others = [c for c in session.spec.actions.candidates() if c not in swap]
    quiet = session.rng.randint(0, length // 2) if others else 0
    return session.random_actions(quiet, others) + session.random_actions(length - quiet)


def _swaps(candidates: list[dict]) -> list[dict]:
    out = []
    for i, a in enumerate(candidates):
        for b in candidates[i + 1:]:
            out.append({"kind": "swap", "actions": [a, b], "spec": {"swap": [a, b]},
                        "description": f"the effects of {_say(a)} and {_say(b)} are swapped"})
    return out


def _state_constants(session: ProbeSession) -> list[dict]:
    """One more and one less on each number held in a dict of the levels' initial states (numbers
    in lists are coordinates, not rules); one less only where no level would go below 0."""
    lowest: dict[str, Any] = {}
    for level in session.levels:
        state = session.worker.reset(level, want_state=True).state
        for path, value in _numbers(state):
            lowest[path] = min(value, lowest.get(path, value))
    out = []
    for path, low in lowest.items():
        for delta in ((1, -1) if low >= 1 else (1,)) if isinstance(low, int) else (low or 1.0,):
            out.append({"kind": "state_constant", "path": path, "delta": delta, "spec": {"state_delta": {path: delta}},
                        "description": f"{path} in the level's state is {'raised' if delta > 0 else 'lowered'} "
                                       f"by {abs(delta)}"})
    return out


def _config_constants(config: dict) -> list[dict]:
    out = []
    for section in CONFIG_SECTIONS:
        for path, value in _numbers(config.get(section), section):
            for new in _nearby(value)[:1]:
                out.append({"kind": "config_constant", "path": path, "from": value, "to": new,
                            "description": f"config.yaml {path} is {new} instead of {value}"})
    return out


def _numbers(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path, value
        elif isinstance(value, dict):
            yield from _numbers(value, path)


def _nearby(value: int | float) -> list:
    if isinstance(value, int):
        return [value + 1] + ([value - 1] if value >= 1 else [])
    return [value * 2 if value else 1.0]


def _say(action: dict) -> str:
    params = " ".join(f"{k}={json.dumps(v)}" for k, v in (action.get("params") or {}).items())
    return f"`{action['action']}{' ' + params if params else ''}`"
