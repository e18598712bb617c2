"""The one cost ledger: every call's tokens and dollars, aggregated per stage, per theme and
per run, and the budget caps that stop a call before it is made.

Budget check: before a call, its worst-case cost is *reserved* — input tokens estimated as
characters / 4 (rounded up) priced at the dearest input rate of the model (cache writes cost
more than plain input on Anthropic), plus `max_tokens` of output. If spent + reserved + this
estimate would pass the run cap or the theme cap, the call is refused with `BudgetExceeded`.
When the call returns, the reservation is replaced by the real cost; a failed call costs 0.
Reserving makes the caps hold under concurrency too.
"""
from __future__ import annotations

import logging
import math
import threading
from dataclasses import asdict, dataclass, field

from pipeline.llm.errors import BudgetExceeded
from pipeline.llm.messages import CallContext, Request, Usage
from pipeline.llm.prices import PriceTable

log = logging.getLogger("envforge.llm")
CHARS_PER_TOKEN = 4
FREE_PROVIDERS = ("replay",)


@dataclass
class Totals:
    calls: int = 0  # answered calls, whatever their source
    from_cache: int = 0
    replayed: int = 0
    retries: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0

    def add(self, usage: Usage, cost: float, source: str, retries: int) -> None:
        self.calls += 1
        self.from_cache += source == "cache"
        self.replayed += source == "replay"
        self.retries += retries
        self.cost_usd += cost  # only provider calls cost; cache hits and replays are free
        # Tokens are what the answers took, whatever their source: a replayed or cached run
        # reports the same token counts as the run that was recorded.
        self.usage = self.usage + usage


def estimate_tokens(request: Request) -> int:
    chars = sum(len(m.content) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)
                for m in request.messages)
    chars += sum(len(t.name) + len(t.description) + len(str(t.parameters)) for t in request.tools)
    return math.ceil(chars / CHARS_PER_TOKEN)


def _hold_under(scope: str, cap_is: str, cap_usd: float | None, spent_usd: float, estimate_usd: float,
                call: str) -> None:
    """Raise BudgetExceeded when spent (or committed) plus this call's estimate would pass the cap."""
    if cap_usd is not None and spent_usd + estimate_usd > cap_usd:
        raise BudgetExceeded(
            f"budget exceeded: {cap_is} ${cap_usd:.4f}, ${spent_usd:.4f} is spent or committed, and the next "
            f"call ({call}) could cost up to ${estimate_usd:.4f}; it was not made",
            scope, cap_usd, spent_usd, estimate_usd)


class Ledger:
    def __init__(self, prices: PriceTable, run_cap_usd: float | None = None,
                 theme_cap_usd: float | None = None):
        self.prices = prices
        self.run_cap_usd = run_cap_usd
        self.theme_cap_usd = theme_cap_usd
        self.run = Totals()
        self.by_stage: dict[str, Totals] = {}
        self.by_theme: dict[str, Totals] = {}
        self.unpriced: set[str] = set()
        self._reserved_run = 0.0
        self._reserved_theme: dict[str, float] = {}
        self._lock = threading.Lock()

    def cost(self, model: str, usage: Usage) -> float:
        if model.split("/", 1)[0] in FREE_PROVIDERS:
            return 0.0
        price = self.prices.lookup(model)
        if price is None:
            if model not in self.unpriced:
                self.unpriced.add(model)
                log.warning("no price for model %s in the price table: its calls are counted as $0 "
                            "(add it with --prices FILE)", model)
            return 0.0
        return price.cost(usage)

    def estimate(self, model: str, request: Request) -> float:
        """Worst-case dollars of `request` (see the module docstring)."""
        tokens_in = estimate_tokens(request)
        price = None if model.split("/", 1)[0] in FREE_PROVIDERS else self.prices.lookup(model)
        if price is None:
            return 0.0
        dearest_input = max(price.input, price.cache_write or 0.0)
        return (tokens_in * dearest_input + request.max_tokens * price.output) / 1_000_000

    def reserve(self, ctx: CallContext, estimate_usd: float) -> float:
        """Hold `estimate_usd` against the caps or raise `BudgetExceeded`; returns the hold."""
        with self._lock:
            _hold_under("run", "the run cap is", self.run_cap_usd, self.run.cost_usd + self._reserved_run,
                        estimate_usd, f"theme {ctx.theme!r}, stage {ctx.stage!r}")
            theme_totals = self.by_theme.get(ctx.theme)
            spent_theme = (theme_totals.cost_usd if theme_totals else 0.0) + self._reserved_theme.get(ctx.theme, 0.0)
            _hold_under("theme", f"theme {ctx.theme!r} has a cap of", self.theme_cap_usd, spent_theme,
                        estimate_usd, f"stage {ctx.stage!r}")
            self._reserved_run += estimate_usd
            self._reserved_theme[ctx.theme] = self._reserved_theme.get(ctx.theme, 0.0) + estimate_usd
            return estimate_usd

    def release(self, ctx: CallContext, held_usd: float) -> None:
        with self._lock:
            self._reserved_run -= held_usd
            self._reserved_theme[ctx.theme] = self._reserved_theme.get(ctx.theme, 0.0) - held_usd

    def settle(self, ctx: CallContext, model: str, usage: Usage, source: str, retries: int,
               held_usd: float = 0.0) -> float:
        """Record one answered call; returns its cost in dollars."""
        cost = self.cost(model, usage) if source == "provider" else 0.0
        with self._lock:
            self._reserved_run -= held_usd
            self._reserved_theme[ctx.theme] = self._reserved_theme.get(ctx.theme, 0.0) - held_usd
            for totals in (self.run, self.by_stage.setdefault(ctx.stage, Totals()),
                           self.by_theme.setdefault(ctx.theme, Totals())):
                totals.add(usage, cost, source, retries)
        return cost

    def theme_cost(self, theme: str) -> float:
        totals = self.by_theme.get(theme)
        return totals.cost_usd if totals else 0.0

    def to_dict(self) -> dict:
        """Plain data for manifests and run records."""
        def plain(t: Totals) -> dict:
            return {**asdict(t), "cost_usd": round(t.cost_usd, 6)}
        return {
            "run": plain(self.run),
            "by_stage": {k: plain(v) for k, v in self.by_stage.items()},
            "by_theme": {k: plain(v) for k, v in self.by_theme.items()},
            "unpriced_models": sorted(self.unpriced),
        }

    def summary(self) -> str:
        """The cost summary every model-calling command prints at the end."""
        lines = ["cost summary:"]
        rows = [(f"stage {stage or '-'}", totals) for stage, totals in sorted(self.by_stage.items())]
        if len(self.by_theme) > 1 or (self.by_theme and "" not in self.by_theme):
            rows += [(f"theme {theme or '-'}", totals) for theme, totals in sorted(self.by_theme.items())]
        rows.append(("total", self.run))
        width = max(16, *(len(label) for label, _ in rows))  # labels whole: themes differ only at the end
        lines.append(f"  {'':<{width}} {'calls':>5} {'cached':>6} {'retries':>7} {'input':>9} {'output':>8} "
                     f"{'cache r/w':>13} {'usd':>10}")
        for label, t in rows:
            u = t.usage
            cache = f"{u.cache_read_tokens}/{u.cache_write_tokens}"
            lines.append(f"  {label:<{width}} {t.calls:>5} {t.from_cache:>6} {t.retries:>7} {u.input_tokens:>9} "
                         f"{u.output_tokens:>8} {cache:>13} {t.cost_usd:>10.6f}")
        if self.run.replayed:
            lines.append(f"  {self.run.replayed} call(s) replayed from recordings (no cost)")
        caps = [f"run ${self.run_cap_usd:.2f}" if self.run_cap_usd is not None else "",
                f"theme ${self.theme_cap_usd:.2f}" if self.theme_cap_usd is not None else ""]
        if any(caps):
            lines.append("  budget: " + ", ".join(c for c in caps if c))
        for model in sorted(self.unpriced):
            lines.append(f"  warning: no price for {model}; counted as $0")
        return "\n".join(lines)
