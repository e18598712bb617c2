"""A generate stage whose sandboxed work is lost with its Ray node runs again, as a new attempt."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from envforge.pipeline.errors import InfrastructureError
from envforge.pipeline.generate import run as generate_run
from envforge.pipeline.sandbox.outside.executor import INFRASTRUCTURE_RETRIES


class Lost(InfrastructureError):
    pass


def _job(outcomes: list, said: list):
    """A Run whose _stage plays `outcomes` in order (an exception is raised, anything else returned)."""
    job = generate_run.Run.__new__(generate_run.Run)
    played = []

    async def stage(ctx, stage):
        played.append(stage.name)
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    job._stage = stage
    job.say = lambda name, what: said.append((name, what))
    return job, played


def test_a_stage_lost_with_its_node_runs_again_and_says_so(monkeypatch):
    monkeypatch.setattr(generate_run, "infrastructure_errors", lambda: (Lost,))
    said: list = []
    job, played = _job([Lost("the Ray node holding x was lost during 'step'"), "report"], said)
    ctx = SimpleNamespace(theme=SimpleNamespace(name="maze"))
    assert asyncio.run(job._stage_anywhere(ctx, SimpleNamespace(name="verify"))) == "report"
    assert played == ["verify", "verify"]
    assert said == [("maze", "verify: the Ray node holding x was lost during 'step'; running it again")]


def test_past_its_retries_a_lost_stage_stops_the_command(monkeypatch):
    monkeypatch.setattr(generate_run, "infrastructure_errors", lambda: (Lost,))
    job, played = _job([Lost("lost")] * (INFRASTRUCTURE_RETRIES + 1), [])
    ctx = SimpleNamespace(theme=SimpleNamespace(name="maze"))
    with pytest.raises(Lost):
        asyncio.run(job._stage_anywhere(ctx, SimpleNamespace(name="verify")))
    assert len(played) == INFRASTRUCTURE_RETRIES + 1


def test_on_one_machine_nothing_is_retried():
    job, played = _job([Lost("lost"), "report"], [])
    ctx = SimpleNamespace(theme=SimpleNamespace(name="maze"))
    with pytest.raises(Lost):
        asyncio.run(job._stage_anywhere(ctx, SimpleNamespace(name="verify")))
    assert played == ["verify"]
