"""The DSL's `termination.conditions`, parsed once when an environment loads and evaluated after
every step (by EventEnv.done): the episode ends as soon as any of them holds.

The conditions are parsed by the DSL's condition parser (dsl_schema/conditions.py) and evaluated by
its evaluator; Python never evaluates the text. A condition may read paths into the state
(`game.over`) and the reserved names `t` (steps taken), `max_steps`, `remaining_steps` and
`last_action_result`. The step cap is not a condition: the runtime truncates at max_steps itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from envforge.dsl_schema.conditions import ConditionError, ConditionSyntaxError, holds, parse_condition
from envforge.dsl_schema.names import CONDITION_SYNTAX
from envforge.dsl_schema.problems import show, typed
from envforge.pipeline import layout
from envforge.pipeline.errors import LocatedError
from envforge.pipeline.located import Problem


@dataclass(frozen=True)
class Condition:
    text: str
    where: str  # termination.conditions[i]
    parsed: Any


@dataclass(frozen=True)
class EndConditions:
    """The parsed `termination.conditions` of one config.yaml."""

    conditions: tuple[Condition, ...]
    file: str = layout.CONFIG

    @classmethod
    def of(cls, config: Any, file: str = layout.CONFIG) -> "EndConditions":
        """Parse `termination.conditions` (absent or null: none). Anything that is not a list of
        conditions in the DSL syntax is a LocatedError naming `file` and the condition's index."""
        termination = config.get("termination") if isinstance(config, dict) else None
        texts = termination.get("conditions") if isinstance(termination, dict) else None
        if texts is None:
            return cls((), file)
        if not isinstance(texts, list):
            raise LocatedError(Problem(file, "termination.conditions", "a list of conditions", typed(texts)))
        conditions = []
        for i, text in enumerate(texts):
            where = f"termination.conditions[{i}]"
            if not isinstance(text, str):
                raise LocatedError(Problem(file, where, CONDITION_SYNTAX, typed(text)))
            try:
                conditions.append(Condition(text, where, parse_condition(text)))
            except ConditionSyntaxError as exc:
                raise LocatedError(Problem(file, where, CONDITION_SYNTAX, f"{show(text)} ({exc})")) from None
        return cls(tuple(conditions), file)

    def any_holds(self, state: Mapping[str, Any], names: Mapping[str, Any]) -> bool:
        """Whether any condition holds in `state`, with `names` the reserved names (t, ...). A
        condition that cannot be evaluated (a path the state lacks, mismatched types) is a
        LocatedError: the DSL and the environment's state disagree."""
        for condition in self.conditions:
            try:
                if holds(condition.parsed, state, names):
                    return True
            except ConditionError as exc:
                raise LocatedError(Problem(self.file, condition.where, "a condition the state can answer",
                                           f"{show(condition.text)}: {exc}")) from None
        return False
