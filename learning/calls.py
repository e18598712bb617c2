"""The model calls of one learning run, under one theme and a few stages, numbered by counters
that are saved with the run's pool.

Costs, budgets and replay go by (theme, stage): the theme is `learn <env> <method>` (the
baseline's is `learn <env> baseline`), so `--theme-budget-usd` caps one method on one
environment, and the stages are `learn-act` (the agent's calls), `learn-analyze` (the signal)
and `learn-rewrite`. Replay serves the n-th call of a (theme, stage), so the numbering must not
depend on timing: each run numbers its own calls, its steps run one after another, and when
recording or replaying its episodes run one at a time too (learning.evaluation). The numbers
are saved with the pool after every evaluation; a resumed run redoes an unfinished evaluation
from its start with the numbers it had then, so it asks for the same recordings again.
"""
from __future__ import annotations

from typing import Any

from envforge.pipeline.llm import LLMClient, Response

ACT, ANALYZE, REWRITE = "learn-act", "learn-analyze", "learn-rewrite"


def theme(env: str, run: str) -> str:
    return f"learn {env} {run}"


class StageClient:
    """An LLMClient as one stage of one run sees it: every call goes under this run's theme and
    this stage, numbered by `counters[stage]` (whatever theme and stage the caller names)."""

    def __init__(self, client: LLMClient, theme: str, stage: str, counters: dict[str, int]):
        self.client, self.theme, self.stage, self.counters = client, theme, stage, counters

    @property
    def spec(self) -> str:
        return self.client.spec

    async def complete(self, messages, **options: Any) -> Response:
        options.pop("theme", None)
        options.pop("stage", None)
        options.pop("index", None)
        index = self.counters[self.stage] = self.counters.get(self.stage, 0) + 1
        return await self.client.complete(messages, theme=self.theme, stage=self.stage, index=index, **options)


def usage_of(response: Response) -> dict:
    u = response.usage
    return {"tokens": u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens,
            "dollars": response.cost_usd, "calls": 1}


def add_usage(total: dict, response: Response) -> None:
    for key, value in usage_of(response).items():
        total[key] = round(total.get(key, 0) + value, 6)
