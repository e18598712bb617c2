"""The one cost ledger: every call's tokens and dollars, aggregated per stage, per theme and
per run, and the budget caps that stop a call before it is made.

Budget check: before a call, its worst-case cost is *reserved* — input tokens estimated as
characters / 4 (rounded up) priced at the dearest input rate of the model (cache writes cost
more than plain input on Anthropic), plus `max_tokens` of output. If spent + reserved + this
estimate would pass the run cap or the theme cap (or any of them is not a finite number), the
call is refused with `BudgetExceeded`. Each attempt of a call holds its own reservation. Reserving
makes the caps hold under concurrency too.

Settling. When a reply is used, the reservation is replaced by its cost at the usage it reports
when that usage is trusted (trust.py: finite non-negative integers, cached <= prompt). An
*untrusted* usage (forged: negative, NaN, a string, more cached than prompt tokens, more tokens than the request
and max_tokens allow; missing; or implausible: fewer prompt tokens than the request's characters / 32)
is charged the larger of the reservation and the cost of the usage estimated from the sizes of
the request and the reply (characters / 4), and its tokens are counted at that estimate (a
count larger than the call could hold was never billed, so it does not overrun a cap); the
ledger counts such calls (forged and missing apart) and keeps the first few reasons. An attempt
that was answered but whose reply could not be used (unreadable, or larger than max_tokens
allows) is billed by the provider: it is charged its reservation and counted as unparsed. An
attempt that got no answer (HTTP error, timeout, dropped connection) costs 0. Every charge is
finite and >= 0, so the spent total never decreases.
"""
from __future__ import annotations

import logging
import math
import threading
from dataclasses import asdict, dataclass, field

from envforge.pipeline.llm.errors import BudgetExceeded
from envforge.pipeline.llm.messages import CallContext, Request, Response, Usage
from envforge.pipeline.llm.prices import PriceTable
from envforge.pipeline.llm.trust import (
    FORGED,
    IMPLAUSIBLE,
    MISSING,
    finite_dollars,
    reply_chars,
    request_chars,
    untrusted_kind,
    usage_problem,
)

log = logging.getLogger("envforge.llm")
CHARS_PER_TOKEN = 4
FREE_PROVIDERS = ("replay",)
UNTRUSTED_KEPT = 50  # reasons kept for the record; the counts cover every call


@dataclass
class Totals:
    calls: int = 0  # answered calls, whatever their source
    from_cache: int = 0
    replayed: int = 0
    retries: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    forged_usage: int = 0  # answered calls whose reported usage was not believable
    missing_usage: int = 0  # answered calls that reported no usage
    implausible_usage: int = 0  # answered calls that reported fewer prompt tokens than their request's size implies
    unparsed: int = 0  # billed attempts whose reply could not be used (charged their reservation)

    @property
    def untrusted(self) -> int:
        return self.forged_usage + self.missing_usage + self.implausible_usage

    def add(self, usage: Usage, cost: float, source: str, retries: int, untrusted: str = "") -> None:
        self.calls += 1
        self.from_cache += source == "cache"
        self.replayed += source == "replay"
        self.retries += retries
        self.cost_usd += cost  # only provider calls cost; cache hits and replays are free
        # Tokens are what the answers took, whatever their source: a replayed or cached run
        # reports the same token counts as the run that was recorded.
        self.usage = self.usage + usage
        self.forged_usage += untrusted == FORGED
        self.missing_usage += untrusted == MISSING
        self.implausible_usage += untrusted == IMPLAUSIBLE

    def add_unparsed(self, cost: float) -> None:
        self.unparsed += 1
        self.cost_usd += cost


def estimate_tokens(request: Request) -> int:
    return math.ceil(request_chars(request) / CHARS_PER_TOKEN)


def estimated_usage(request: Request | None, response: Response) -> Usage:
    """The usage of a call that reported none we can trust: its request and reply sizes in
    tokens (characters / 4, rounded up)."""
    return Usage(input_tokens=estimate_tokens(request) if request is not None else 0,
                 output_tokens=math.ceil(reply_chars(response) / CHARS_PER_TOKEN))


def _hold_under(scope: str, cap_is: str, cap_usd: float | None, spent_usd: float, estimate_usd: float,
                call: str) -> None:
    """Raise BudgetExceeded when spent (or committed) plus this call's estimate would pass the cap,
    or when any of the numbers is not finite (written so that NaN refuses the call)."""
    if cap_usd is not None and not (spent_usd + estimate_usd <= cap_usd):
        raise BudgetExceeded(
            f"budget exceeded: {cap_is} ${cap_usd:.4f}, ${spent_usd:.4f} is spent or committed, and the next "
            f"call ({call}) could cost up to ${estimate_usd:.4f}; it was not made",
            scope, cap_usd, spent_usd, estimate_usd)


class Ledger:
    def __init__(self, prices: PriceTable, run_cap_usd: float | None = None,
                 theme_cap_usd: float | None = None):
        self.prices = prices
        self.run_cap_usd = None if run_cap_usd is None else finite_dollars(run_cap_usd, "run budget")
        self.theme_cap_usd = None if theme_cap_usd is None else finite_dollars(theme_cap_usd, "theme budget")
        self.run = Totals()
        self.by_stage: dict[str, Totals] = {}
        self.by_theme: dict[str, Totals] = {}
        self.unpriced: set[str] = set()
        self.untrusted: list[dict] = []  # the first UNTRUSTED_KEPT untrusted usages and unparsed replies
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
        return finite_dollars((tokens_in * dearest_input + request.max_tokens * price.output) / 1_000_000,
                              f"the estimate of a call to {model}")

    def reserve(self, ctx: CallContext, estimate_usd: float) -> float:
        """Hold `estimate_usd` against the caps or raise `BudgetExceeded`; returns the hold."""
        estimate_usd = finite_dollars(estimate_usd, "a call's estimate")
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

    def settle(self, ctx: CallContext, model: str, response: Response, source: str, retries: int,
               held_usd: float = 0.0, request: Request | None = None) -> float:
        """Record one answered call; returns its cost in dollars (see the module docstring).
        `held_usd`: the call's reservation; `request`: what was sent (sizes an untrusted usage)."""
        problem = response.usage_problem or usage_problem(response.usage, request, reported=source != "replay")
        usage = estimated_usage(request, response) if problem else response.usage
        cost = self.cost(model, usage) if source == "provider" else 0.0
        if problem and source == "provider":
            cost = max(cost, held_usd)
        cost = finite_dollars(cost, f"the cost of a call to {model}")
        with self._lock:
            self._reserved_run -= held_usd
            self._reserved_theme[ctx.theme] = self._reserved_theme.get(ctx.theme, 0.0) - held_usd
            for totals in self._totals(ctx):
                totals.add(usage, cost, source, retries, untrusted_kind(problem))
            if problem:
                self._keep(ctx, problem, cost, source)
        if problem and source == "provider":
            log.warning("%s (theme %r, stage %r): charged $%.6f, the call's reservation or more",
                        problem, ctx.theme, ctx.stage, cost)
        return cost

    def charge_unparsed(self, ctx: CallContext, held_usd: float, why: str) -> float:
        """An attempt the provider answered (and billed) with a reply we could not use: it costs
        its reservation `held_usd`, which it already holds."""
        cost = finite_dollars(held_usd, "a call's reservation")
        with self._lock:
            self._reserved_run -= held_usd
            self._reserved_theme[ctx.theme] = self._reserved_theme.get(ctx.theme, 0.0) - held_usd
            for totals in self._totals(ctx):
                totals.add_unparsed(cost)
            self._keep(ctx, f"unparsed reply: {why}", cost, "provider")
        return cost

    def _totals(self, ctx: CallContext) -> tuple[Totals, Totals, Totals]:
        return self.run, self.by_stage.setdefault(ctx.stage, Totals()), self.by_theme.setdefault(ctx.theme, Totals())

    def _keep(self, ctx: CallContext, problem: str, cost: float, source: str) -> None:
        if len(self.untrusted) < UNTRUSTED_KEPT:
            self.untrusted.append({"theme": ctx.theme, "stage": ctx.stage, "source": source,
                                   "problem": problem[:300], "charged_usd": round(cost, 6)})

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
            "untrusted": list(self.untrusted),
        }

    def untrusted_line(self) -> str:
        """How many calls had untrusted usage or unusable replies, and what was charged for them;
        "" when none."""
        run = self.run
        if not run.untrusted and not run.unparsed:
            return ""
        parts = []
        if run.untrusted:
            parts.append(f"{run.untrusted} call(s) with untrusted usage ({run.forged_usage} forged, "
                         f"{run.missing_usage} missing, {run.implausible_usage} implausible), each charged at least "
                         f"its reservation")
        if run.unparsed:
            parts.append(
                f"{run.unparsed} billed attempt(s) whose reply could not be used, each charged its reservation"
            )
        return "; ".join(parts)

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
        if self.untrusted_line():
            lines.append(f"  untrusted: {self.untrusted_line()}")
            lines += [f"    {u['stage'] or '-'} {u['theme'] or '-'}: {u['problem'][:160]}" for u in self.untrusted[:5]]
        caps = [f"run ${self.run_cap_usd:.2f}" if self.run_cap_usd is not None else "",
                f"theme ${self.theme_cap_usd:.2f}" if self.theme_cap_usd is not None else ""]
        if any(caps):
            lines.append("  budget: " + ", ".join(c for c in caps if c))
        for model in sorted(self.unpriced):
            lines.append(f"  warning: no price for {model}; counted as $0")
        return "\n".join(lines)
