"""The one action space of an environment, as the host sees it (read as data, never run).

Everything that picks, checks or lists actions uses it: `check` and verification's random and
planner rollouts, the random agent, evaluate's validity figures and the search. What is shown of
it and typed into it (the agents' text and tool schemas, `play`'s listing and parser) is its
ActionText (action_text.py). Actions come from config.yaml's `transition.actions`. A typed
parameter's domain is the DSL's (`enum`, `range`); an untyped one's is read from evidence
(action_space.txt, the instruction, the DSL's texts, the levels; see evidence.py), and `sources`
says which. An inferred domain steers sampling and search; only declared domains make an action
invalid, since an agent is not faulted on a guess.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any, Iterable

from envforge.dsl_schema.actions import Action, Param, actions
from envforge.pipeline.envfolder import evidence

DECLARED = "config.yaml"
NO_EVIDENCE = "none (one sampled value)"
SMALL_RANGE = 20  # an integer range this wide or narrower is enumerated whole for search
# At most this many parameter combinations of one action go into a search: values multiply across
# parameters (three of 32 values each would be 32,768 actions per node, all sent in each request).
MAX_COMBINATIONS = 256
# At most this many combinations of values drawn from a level (envfolder/values.py) join one action's: 732
# candidates instead of 25 left 1_InterDimension's search 27 nodes to expand, and lower maxima on 11 of 15 levels.
MAX_MORE = 16
_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


@dataclass(frozen=True)
class ActionSpace:
    actions: tuple[Action, ...] = ()
    sources: dict[tuple[str, str], str] = field(default_factory=dict)  # (action, param) -> where its domain came from

    @classmethod
    def from_config(cls, config: Any, texts: Iterable[tuple[str, str]] = (),
                    levels: Iterable[tuple[str, Any]] = ()) -> "ActionSpace":
        """The declared actions, untyped domains filled from `texts` ((source, text), tried in
        order) and then `levels` ((source, data))."""
        texts, levels = list(texts), list(levels)
        filled, sources = [], {}
        for action in actions(config):
            params = []
            for p in action.params:
                if p.enum is not None or p.range is not None:
                    sources[action.name, p.name] = DECLARED
                elif p.type in (None, "string", "integer", "number"):
                    found = evidence.from_texts(p.name, texts) or evidence.from_levels(p.name, levels)
                    if found is not None and _fits(found, p.type):
                        p = dataclasses.replace(p, enum=found.values, range=found.range)
                    sources[action.name, p.name] = (
                        found.source if found is not None and _fits(found, p.type) else NO_EVIDENCE
                    )
                params.append(p)
            filled.append(dataclasses.replace(action, params=tuple(params)))
        return cls(tuple(filled), sources)

    @classmethod
    def of(cls, spec) -> "ActionSpace":
        """The space of an opened EnvSpec, with its evidence: action_space.txt, the instruction,
        the DSL's own text and state_template."""
        texts = [("action_space.txt", spec.action_text), ("agent_instruction.txt", spec.instruction),
                 ("config.yaml text", spec.config_text)]
        return cls.from_config(spec.config, texts, [("config.yaml state_template", spec.config.get("state_template"))])

    def for_state(self, state: Any, source: str = "the level") -> "ActionSpace":
        """This space on one level: a parameter still without a domain takes the values the level's
        state stores under its name (evidence.from_levels), so a search there tries the level's own
        locations, names and ids instead of one sampled value. Such a domain is a guess too."""
        filled, sources = [], dict(self.sources)
        for action in self.actions:
            params = []
            for p in action.params:
                if sources.get((action.name, p.name)) == NO_EVIDENCE:
                    found = evidence.from_levels(p.name, [(source, state)], scalars=True)
                    if found is not None and _fits(found, p.type):
                        p, sources[action.name, p.name] = dataclasses.replace(p, enum=found.values), found.source
                params.append(p)
            filled.append(dataclasses.replace(action, params=tuple(params)))
        return ActionSpace(tuple(filled), sources)

    def __bool__(self) -> bool:
        return bool(self.actions)

    def __len__(self) -> int:
        return len(self.actions)

    def __iter__(self):
        return iter(self.actions)

    def __getitem__(self, index: int) -> Action:
        return self.actions[index]

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.actions]

    def get(self, name: str) -> Action | None:
        return next((a for a in self.actions if a.name == name), None)

    # -- sampling ------------------------------------------------------------------------
    def sample_params(self, action: Action, rng: random.Random) -> dict[str, Any]:
        return {p.name: _sample_value(p, rng) for p in action.params if not p.optional or rng.random() < 0.5}

    def sample(self, rng: random.Random, invalid_rate: float = 0.0) -> dict:
        """A random action; with probability `invalid_rate`, a malformed one (unknown name or
        out-of-range parameter), because environments must survive what agents really send."""
        space = self.actions
        if not space or rng.random() < invalid_rate:
            return rng.choice([
                {"action": "__no_such_action__", "params": {}},
                {"action": space[0].name if space else "noop", "params": {"__bogus__": -999999}},
                {"action": rng.choice(space).name if space else "noop", "params": {}},
            ])
        action = rng.choice(space)
        return {"action": action.name, "params": self.sample_params(action, rng)}

    # -- membership ----------------------------------------------------------------------
    def invalid_reason(self, action: dict) -> str | None:
        """Why `action` does not fit the declared action space (None when it fits or none is
        declared): an unknown name, a missing or unknown parameter, a value of the wrong JSON
        type, outside its declared enum or range."""
        declared = {a.name: a for a in self.actions}
        if not declared:
            return None
        spec = declared.get(action.get("action"))
        if spec is None:
            return f"unknown action {action.get('action')!r}"
        params = action.get("params")
        if not isinstance(params, dict):
            return "params is not a dictionary"
        known = {p.name: p for p in spec.params}
        for name in params:
            if name not in known:
                return f"{spec.name} has no parameter {name!r}"
        for p in spec.params:
            if p.name not in params:
                if not p.optional:
                    return f"{spec.name} needs parameter {p.name!r}"
                continue
            value = params[p.name]
            expected = _JSON_TYPES.get(p.type or "")
            if expected and (not isinstance(value, expected) or (isinstance(value, bool) and p.type != "boolean")):
                return f"{p.name} must be of type {p.type}, found {value!r}"
            if self.sources.get((spec.name, p.name), DECLARED) != DECLARED:
                continue
            if p.enum is not None and value not in p.enum:
                return f"{p.name} must be one of {list(p.enum)}, found {value!r}"
            if p.range is not None:
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not p.range[0] <= value <= p.range[1]
                ):
                    return f"{p.name} must be from {p.range[0]} to {p.range[1]}, found {value!r}"
        return None

    def sent_invalid(self, action: dict, events: Iterable[Any]) -> str | None:
        """Why an action the environment was sent counts as invalid (None: it does not): it does not
        fit the declared space, or the environment said so by an event its own vocabulary names
        invalid (AutoEnv's "invalid_action", "invalid_position": an event name, not a message). The
        one rule for evaluate's counts and serve's observations."""
        return self.invalid_reason(action) or next(
            (f"the environment reported {e!r}" for e in events if str(e).lower().startswith("invalid")), None)

    def invalid_examples(self, most: int = 6) -> list[tuple[str, dict]]:
        """(what it is, action) for up to `most` actions this space calls invalid (invalid_reason),
        of the kinds agents really send: a name it does not declare, then for declared actions in
        turn a value outside a declared range or enum, a value of the wrong type, a missing
        parameter (a parameter it does not have is left out: ignoring one is no fault).
        Deterministic; empty when nothing is declared."""
        if not self.actions:
            return []
        name = "undeclared_action"
        while self.get(name) is not None:
            name += "_"
        found = [(f"an undeclared action {name!r}", {"action": name, "params": {}})]
        for action in self.actions:
            values = {p.name: _candidate_values(p)[0] for p in action.params}
            for p in action.params:
                for what, value in _outside(p):
                    found.append((f"{action.name} with {p.name}={value!r} ({what})",
                                  {"action": action.name, "params": {**values, p.name: value}}))
                if not p.optional:
                    found.append((f"{action.name} without its parameter {p.name!r}",
                                  {"action": action.name, "params": {k: v for k, v in values.items() if k != p.name}}))
        kept = [(what, a) for what, a in found if self.invalid_reason(a)]
        if len(kept) <= most:
            return kept
        return [kept[0]] + [kept[1 + i * (len(kept) - 2) // max(1, most - 2)] for i in range(most - 1)]

    # -- search --------------------------------------------------------------------------
    def candidates(self, values: dict[tuple[str, str], list] | None = None) -> list[dict]:
        """Every action with every combination of its parameters' values (an integer range of at
        most 20 values whole, a wider or real one by its ends and middle; a parameter with no
        known domain, one sampled value); past MAX_COMBINATIONS for one action, that many spread
        evenly over them, the same each time (complete() is then False). `values`: (action,
        parameter) -> more values to try, as envfolder/values.py draws them from a level: their
        combinations follow all of those (so a search meets the domain's own first), at most
        MAX_MORE more for one action, spread evenly over them (each one widens every node of a search)."""
        out, more = [], []
        for action in self.actions:
            names = [p.name for p in action.params]
            own = list(_combinations([_candidate_values(p) for p in action.params]))
            out += [{"action": action.name, "params": dict(zip(names, combo))} for combo in own]
            chosen = [(values or {}).get((action.name, p.name)) for p in action.params]
            if not any(chosen):
                continue
            known = {repr(combo) for combo in own}
            wider = [c or _candidate_values(p) for c, p in zip(chosen, action.params)]
            extra = [combo for combo in _combinations(wider) if repr(combo) not in known]
            room = min(MAX_MORE, max(0, MAX_COMBINATIONS - len(own)))
            spread = extra if len(extra) <= room else [extra[i * len(extra) // room] for i in range(room)]
            more += [{"action": action.name, "params": dict(zip(names, combo))} for combo in spread]
        return out + more

    def complete(self, guesses: bool = False) -> bool:
        """Whether `candidates()` is the whole action space: every parameter's domain is declared
        (a domain read from evidence is a guess) and enumerated whole (an enum, or an integer
        range of at most SMALL_RANGE values). Only then can a search that runs out of states
        prove a level unsolvable. `guesses`: a domain read from evidence (action_space.txt, the
        level) counts too, one sampled value never does (what a fixed list of actions can offer)."""
        for action in self.actions:
            if _count([_candidate_values(p) for p in action.params]) > MAX_COMBINATIONS:
                return False  # candidates() took a sample
            for p in action.params:
                source = self.sources.get((action.name, p.name))
                if source == NO_EVIDENCE or (source != DECLARED and not guesses):
                    return False
                if p.enum:
                    continue
                lo, hi = p.range
                if p.type == "number" or type(lo) is not int or type(hi) is not int or hi - lo > SMALL_RANGE:
                    return False
        return True


def _fits(found: evidence.Domain, kind: str | None) -> bool:
    if kind == "string":
        return found.values is not None and all(isinstance(v, str) for v in found.values)
    if kind in ("integer", "number"):
        return found.range is not None or all(isinstance(v, int) for v in found.values or ("x",))
    return True


def _sample_value(param: Param, rng: random.Random) -> Any:
    if param.enum:
        return rng.choice(list(param.enum))
    if param.range:
        lo, hi = param.range
        if param.type == "number":
            return rng.uniform(lo, hi)
        return rng.randint(int(lo), int(hi))
    return {"number": rng.uniform(0, 5), "boolean": rng.random() < 0.5, "string": "a", "array": [],
            "object": {}}.get(param.type or "", rng.randint(0, 5))


def _outside(p: Param) -> list[tuple[str, Any]]:
    """Values a declared parameter refuses: past its range's ends, outside its enum, of another type."""
    out = []
    if p.range is not None:
        lo, hi = p.range
        step = 1 if isinstance(hi, int) and isinstance(lo, int) else max(1.0, abs(hi - lo))
        out += [("above its range", hi + step), ("below its range", lo - step)]
    if p.enum is not None:
        out.append(("outside its values", "not_one_of_them" if not any(v == "not_one_of_them" for v in p.enum)
                    else "not_one_of_them_"))
    if p.type in ("integer", "number", "boolean"):
        out.append(("of the wrong type", "not_a_number"))
    elif p.type == "string":
        out.append(("of the wrong type", 12345))
    return out


def _count(values: list[list]) -> int:
    total = 1
    for v in values:
        total *= len(v)
    return total


def _combinations(values: list[list]) -> Iterable[tuple]:
    """Every combination of one value per list, or MAX_COMBINATIONS of them at even strides over
    their product (the combination at index i read as a mixed-radix number): deterministic."""
    total = _count(values)
    for index in range(total) if total <= MAX_COMBINATIONS else (i * total // MAX_COMBINATIONS
                                                                  for i in range(MAX_COMBINATIONS)):
        combo = []
        for v in reversed(values):
            index, digit = divmod(index, len(v))
            combo.append(v[digit])
        yield tuple(reversed(combo))


def _candidate_values(p: Param) -> list:
    if p.enum:
        return list(p.enum)
    if p.range:
        lo, hi = p.range
        if type(lo) is int and type(hi) is int and p.type != "number" and hi - lo <= SMALL_RANGE:
            return list(range(lo, hi + 1))
        return sorted({lo, hi, (lo + hi) // 2 if isinstance(lo, int) else (lo + hi) / 2})
    return [_sample_value(p, random.Random(0))]
