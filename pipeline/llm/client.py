"""The async facade the rest of envforge calls: `await client.complete(messages, theme=, stage=)`.

One call goes: replay (if replaying) or cache lookup -> retries of: budget reservation ->
concurrency slot -> provider with a timeout -> reply checks (trust.py) -> ledger -> cache ->
recording. Each attempt reserves its worst case; an attempt answered with a reply we cannot use
is charged (the provider billed it), one that got no answer is released. Use one client per run and
per event loop: its concurrency limit and its HTTP connections belong to that loop.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Iterable

from envforge.pipeline.llm.cache import ResponseCache, cache_key
from envforge.pipeline.llm.config import LLMConfig
from envforge.pipeline.llm.errors import MalformedResponse, TransientError
from envforge.pipeline.llm.ledger import Ledger
from envforge.pipeline.llm.messages import CallContext, Message, Request, Response, ToolSpec
from envforge.pipeline.llm.prices import PriceTable
from envforge.pipeline.llm.replay import Recorder, Replayer
from envforge.pipeline.llm.retry import call_with_retries
from envforge.pipeline.llm.trust import check_reply_size, reply_byte_cap, reply_char_cap, reply_chars


def make_provider(config: LLMConfig):
    if config.provider == "anthropic":
        from envforge.pipeline.llm.anthropic_provider import AnthropicProvider
        return AnthropicProvider(config.api_key, config.base_url, config.timeout)
    if config.provider == "openai":
        from envforge.pipeline.llm.openai_provider import OpenAIProvider
        return OpenAIProvider(config.api_key, config.base_url, config.timeout)
    return None  # replay needs no network provider


class LLMClient:
    def __init__(self, config: LLMConfig, ledger: Ledger | None = None):
        self.config = config
        budget = config.budget
        self.ledger = ledger or Ledger(PriceTable.load(budget.prices_file), budget.run_usd, budget.theme_usd)
        self.provider = make_provider(config)
        self.cache = ResponseCache(config.cache_path) if config.cache_path else None
        self.recorder = Recorder(config.record_dir) if config.record_dir else None
        self.replayer = Replayer(config.replay_dir) if config.replay_dir else None
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._counters: dict[CallContext, int] = {}
        # Same model behind another base URL may answer differently: keep their caches apart.
        self._cache_identity = config.provider + (f"@{config.base_url}" if config.base_url else "")

    @property
    def spec(self) -> str:
        return self.config.spec

    async def complete(
        self,
        messages: Iterable[Message],
        *,
        theme: str = "",
        stage: str = "",
        tools: Iterable[ToolSpec] = (),
        max_tokens: int = 4096,
        temperature: float | None = None,
        stop: Iterable[str] = (),
        sample: int = 0,
        use_cache: bool = True,
        index: int | None = None,
        subject: str = "",
    ) -> Response:
        """Ask the model. `theme` and `stage` say who is asking (costs, budgets and replay go by
        them). Pass a different `sample` to get a fresh answer to a prompt already cached.

        Raises BudgetExceeded (call not made), ProviderError (refused; not retried),
        RetriesExhausted, MalformedResponse, ReplayMissing / ReplayInvalid — all LLMError.
        `index` numbers the call within its theme and stage (default: the next one); a resumed
        stage passes it so that its calls keep their numbers. `subject`: the whole theme text, which
        replay matches recordings on."""
        ctx = CallContext(theme, stage, subject)
        request = Request(self.config.model, tuple(messages), tuple(tools), max_tokens, temperature, tuple(stop))
        index = self._counters[ctx] = index if index is not None else self._counters.get(ctx, 0) + 1

        if self.replayer is not None:
            response = self.replayer.load(ctx, index, reply_byte_cap(request.max_tokens))
            check_reply_size(f"replay from {self.replayer.root}", response, request.max_tokens)
            self.ledger.settle(ctx, response.model, response, "replay", 0, request=request)
            return self._recorded(ctx, index, request, response)

        key = None
        if self.cache is not None and use_cache:
            key = cache_key(self._cache_identity, request.key_material(), sample)
            # An entry larger than the reply cap (written before there was one) is neither read nor served.
            hit = await self.cache.get(key, reply_byte_cap(request.max_tokens))
            if hit is not None and reply_chars(hit) <= reply_char_cap(request.max_tokens):
                self.ledger.settle(ctx, self.spec, hit, "cache", 0, request=request)
                return self._recorded(ctx, index, request, hit)

        estimate = self.ledger.estimate(self.spec, request)

        async def attempt() -> tuple[Response, float]:
            held = self.ledger.reserve(ctx, estimate)  # BudgetExceeded: not retried, nothing held
            try:
                answer = await self._attempt(request)
                check_reply_size(self.config.provider, answer, request.max_tokens)
            except MalformedResponse as exc:
                self.ledger.charge_unparsed(ctx, held, str(exc))  # answered, so billed
                raise
            except BaseException:
                self.ledger.release(ctx, held)
                raise
            return answer, held

        (response, held), retries = await call_with_retries(attempt, self.config.retry)
        cost = self.ledger.settle(ctx, self.spec, response, "provider", len(retries), held, request)
        response = replace(response, retries=retries, cost_usd=cost)
        if key is not None:
            await self.cache.put(key, self._cache_identity, response)
        return self._recorded(ctx, index, request, response)

    async def _attempt(self, request: Request) -> Response:
        async with self._slots:
            try:
                # The SDK's own timeout covers each socket operation; this bounds the whole call.
                return await asyncio.wait_for(self.provider.complete(request), self.config.timeout)
            except asyncio.TimeoutError as exc:
                raise TransientError(f"{self.config.provider}: no answer within {self.config.timeout:g} s",
                                     "timeout") from exc

    def _recorded(self, ctx: CallContext, index: int, request: Request, response: Response) -> Response:
        if self.recorder is not None:
            self.recorder.write(ctx, index, request, self.spec, response)
        return response

    async def aclose(self) -> None:
        if self.provider is not None:
            await self.provider.close()

    async def __aenter__(self) -> "LLMClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
