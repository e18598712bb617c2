"""The one "ask, extract, check, feed back" loop: what goes back to the model, and how it ends."""
from __future__ import annotations

import asyncio

from envforge.pipeline.llm.ask import ask_until_valid
from envforge.pipeline.llm.errors import BudgetExceeded
from envforge.pipeline.llm.messages import Response


def run(replies, attempts=3, fit=lambda value: "" if value == "good" else f"{value} is not good"):
    """Replies are played in order (an exception is raised); returns the outcome and what the
    model was told before each call."""
    told: list[tuple[str | None, str]] = []

    async def ask(last, problem):
        told.append((last.text if last else None, problem))
        reply = replies[len(told) - 1]
        if isinstance(reply, Exception):
            raise reply
        return Response(text=reply)

    def extract(text):
        return text.split("VALUE:")[1].strip() if "VALUE:" in text else None

    async def check(value):
        return fit(value)

    return asyncio.run(ask_until_valid(ask, extract, check, attempts, "expected VALUE: in the reply")), told


def test_a_problem_goes_back_with_the_reply_and_a_fixed_answer_is_accepted():
    asked, told = run(["VALUE: bad", "VALUE: good"])
    assert (asked.exit_status, asked.value, asked.attempts) == ("accepted", "good", 2)
    assert told == [(None, ""), ("VALUE: bad", "bad is not good")]


def test_gives_up_after_the_attempts_keeping_the_last_artefact_for_review():
    asked, told = run(["VALUE: bad", "VALUE: worse", "VALUE: worst"])
    assert (asked.exit_status, asked.value, asked.problem) == ("gave_up_after_3", "worst", "worst is not good")
    assert len(told) == 3


def test_a_last_reply_without_an_artefact_is_unparseable():
    asked, told = run(["VALUE: bad", "no value here"], attempts=2)
    assert (asked.exit_status, asked.value, asked.problem) == ("unparseable", "bad", "expected VALUE: in the reply")
    assert told[1] == ("VALUE: bad", "bad is not good")


def test_a_budget_stop_is_named_and_carries_the_exception_on():
    cap = BudgetExceeded("budget exceeded: the run cap is $0.01", "run", 0.01, 0.01, 0.002)
    asked, told = run(["VALUE: bad", cap])
    assert (asked.exit_status, asked.attempts, asked.error) == ("budget", 1, cap)
    try:
        asked.raise_budget()
    except BudgetExceeded as e:
        assert e is cap
    else:
        raise AssertionError("raise_budget let a budget stop pass silently")
