"""The one "ask, extract, check, feed back" loop.

A model is asked for an artefact (a DSL document, a skin, an agent's code); the artefact is
extracted from its reply, checked, and — while the check finds a problem — the problem goes back
to the model for another attempt, up to `attempts` calls in all. How the loop ended is a name:

    accepted          the last artefact passed its check
    gave_up_after_N   N attempts, the last artefact still failed its check
    unparseable       N attempts, and the last reply held no artefact at all
    budget            a budget cap stopped the next call (`Asked.error` is the BudgetExceeded)

The caller owns the conversation (`ask`) and the words (templates): the loop owns the order
and the limits, so every model-written artefact is handled the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, TypeVar

from envforge.pipeline.llm.errors import BudgetExceeded
from envforge.pipeline.llm.messages import Response

T = TypeVar("T")
ACCEPTED, UNPARSEABLE, BUDGET = "accepted", "unparseable", "budget"


def gave_up(attempts: int) -> str:
    return f"gave_up_after_{attempts}"


@dataclass
class Asked(Generic[T]):
    exit_status: str
    value: T | None  # the accepted artefact, else the last one tried (kept for people to read)
    problem: str  # why the last artefact failed ("" when accepted)
    attempts: int  # model calls made
    error: BudgetExceeded | None = None

    @property
    def accepted(self) -> bool:
        return self.exit_status == ACCEPTED

    def raise_budget(self) -> None:
        """Let a budget stop travel on, to the command that stops the run."""
        if self.error is not None:
            raise self.error


async def ask_until_valid(ask: Callable[[Response | None, str], Awaitable[Response]],
                          extract: Callable[[str], T | None],
                          check: Callable[[T], Awaitable[str]],
                          attempts: int, unparseable: str) -> Asked[T]:
    """`ask(last_reply, problem)` makes one call: the first with (None, ""), each later one with
    the previous reply and what was wrong with it. `extract(text)` returns the artefact or None;
    `check(artefact)` returns "" when it is fit, else the problem in words the model can act on;
    `unparseable` is the problem when a reply holds no artefact."""
    attempts = max(1, attempts)
    last: Response | None = None
    value: T | None = None
    problem, parsed = "", True
    for n in range(1, attempts + 1):
        try:
            last = await ask(last, problem)
        except BudgetExceeded as exc:
            return Asked(BUDGET, value, problem or str(exc), n - 1, exc)
        found = extract(last.text)
        parsed = found is not None
        if not parsed:
            problem = unparseable
            continue
        value = found
        problem = await check(found)
        if not problem:
            return Asked(ACCEPTED, value, "", n)
    return Asked(gave_up(attempts) if parsed else UNPARSEABLE, value, problem, attempts)
