"""Stage 2, levels: verify's certification of its levels on several workers at once (each level's
certified max reward: pipeline/levelmax.py), and level_max_rewards.json."""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from envforge.pipeline import layout
from envforge.pipeline import records as files
from envforge.pipeline.errors import Rejected
from envforge.pipeline.kinds import LevelMaxEntry, LevelMaxRewards, LevelsFigures
from envforge.pipeline.levelmax import FIT_MARGIN, LevelMax, certify
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient, Verdict
from envforge.pipeline.verify.causes import crashed
from envforge.pipeline.verify.context import Context, failure_text, located


class PooledCertifier:
    """Certifies levels on several workers at once (one search each), once per distinct state.

    A level certified once is not searched again (a generated level equal to a shipped one, the
    reliability stage after the levels stage); one certified only as fit (`fitness`) is searched
    again when it is kept. With `ctx.options.progress`, a line per level:
    how many are done, the max found against its bound, nodes per second and the budget left."""

    def __init__(self, ctx: Context, workers: list[EnvClient], figures: LevelsFigures):
        self.ctx, self.figures = ctx, figures
        self.cache: dict[str, LevelMax] = {}
        self.fit_cache: dict[str, LevelMax] = {}  # certified only as fit (fit_only)
        self.free: queue.Queue = queue.Queue()
        for worker in workers:
            self.free.put(worker)
        self.pool = ThreadPoolExecutor(len(workers), thread_name_prefix="certify")
        self.lock = threading.Lock()
        self.done, self.total = 0, 0
        figures.exact = figures.exact or 0
        figures.safety_stops = figures.safety_stops or 0

    def many(self, items: list[tuple[str, Verdict]], fit_only: bool = False) -> list[LevelMax]:
        """[(source, validator verdict)] -> their certified max rewards, in order. `fit_only`: only
        whether each is fit is needed (see the module docstring)."""
        cache = self.fit_cache if fit_only else self.cache
        todo: dict[str, tuple[str, Verdict, bool]] = {}
        for source, verdict in items:
            if not fit_only and verdict.state_hash not in self.cache and self._whole(source, verdict):
                self.cache[verdict.state_hash] = self.fit_cache[verdict.state_hash]
            if verdict.state_hash not in self.cache and verdict.state_hash not in cache:
                todo.setdefault(verdict.state_hash, (source, verdict, fit_only))
        self.total += len(todo)
        for digest, lm in zip(todo, self.pool.map(self._one, todo.values())):
            cache[digest] = lm
        return [dataclasses.replace(self.cache.get(v.state_hash) or cache[v.state_hash], source=s) for s, v in items]

    def _whole(self, source: str, verdict: Verdict) -> bool:
        """Whether the level's fit-only certification is the one the whole budget gives: it ended on a
        proof (the DSL's bound met, or the space exhausted), so its lowered target stopped nothing; and
        this level's target (validator bound, or shipped claim) is no lower than that one was. Its state
        is the same; a stochastic env's seed is not (a generated level draws from its own seed)."""
        lm = self.fit_cache.get(verdict.state_hash)
        if lm is None or not lm.proof or self.figures.stochastic or lm.validator_bound != verdict.max_reward:
            return False
        claim = self.ctx.claims.get(source.rsplit("/", 1)[-1].removesuffix(".yaml")) if "/" in source else None
        return verdict.max_reward is not None or claim is None or claim >= lm.nothing_reward + FIT_MARGIN

    @property
    def fitness(self) -> "FitnessCertifier":
        """This certifier for levels of which only fitness is asked (the level factory's `many`)."""
        return FitnessCertifier(self)

    def _one(self, item: tuple[str, Verdict, bool]) -> LevelMax:
        source, verdict, fit_only = item
        worker = self.free.get()
        started = time.monotonic()
        try:
            lm = certify(self.ctx.search, worker, source, verdict.max_reward, verdict.state_hash, fit_only=fit_only)
        except SandboxFailure as f:
            raise Rejected(f"{located(f, layout.ENV_MAIN)}: expected the search for the max reward of {source} to "
                           f"run without failure, found {failure_text(f)}",
                           cause=crashed(f, layout.ENV_MAIN, "the search for the max reward", source)) from None
        finally:
            with self.lock:  # summed over the workers, which search at the same time
                self.figures.search_seconds = round(self.figures.search_seconds + time.monotonic() - started, 3)
            self.free.put(worker)
        with self.lock:
            f = self.figures
            f.search_nodes += lm.search_nodes
            f.exact += lm.exact
            f.safety_stops += lm.cut_by_clock
            f.nodes_per_second = round(f.search_nodes / f.search_seconds) if f.search_seconds else None
            self.done += 1
            self.ctx.options.say(self._progress_line(lm))
        return lm

    def _progress_line(self, lm: LevelMax) -> str:
        f, opts = self.figures, self.ctx.options
        left = ""
        if self.ctx.deadline is not None:
            left = f", {max(0.0, self.ctx.deadline[0] - time.monotonic()):.0f}s of --budget left"
        return (f"levels: {self.done}/{self.total} certified; {lm.source}: {standing(lm)}; "
                f"{f.search_nodes:,} nodes at {f.nodes_per_second or 0:,}/s; budget "
                f"{opts.search_nodes:,} nodes per level, {self.total - self.done} level(s) to go{left}")


@dataclasses.dataclass(frozen=True)
class FitnessCertifier:
    """A PooledCertifier's `many` with `fit_only` (what the level factory calls)."""

    certifier: PooledCertifier

    def many(self, items: list[tuple[str, Verdict]]) -> list[LevelMax]:
        return self.certifier.many(items, fit_only=True)


def standing(lm: LevelMax) -> str:
    """How a level's max reward stands, in words: exact, claim met, a lower bound (and its gap), unknown."""
    if lm.exact:
        return (
            f"max {lm.max_reward:g}, exact ({'space exhausted' if lm.proof == 'exhausted' else 'declared bound met'})"
        )
    if lm.certainty == "unknown":
        return f"max unknown (best {lm.search_reward:g})"
    if lm.certainty == "lower_bound":
        gap = f", bound {lm.upper_bound:g}" if lm.upper_bound is not None else ", no upper bound"
        return f"max >= {lm.max_reward:g} (lower bound{gap})"
    if lm.certainty == "unconfirmed_bound":
        return f"max {lm.max_reward:g} claimed, best found {lm.search_reward:g}"
    return f"max {lm.max_reward:g} (validator bound met, not proved)"


def write_max_rewards(ctx: Context, levels: list[LevelMax]) -> None:
    """level_max_rewards.json in the AutoEnv C.1 shape, plus our per-level certification fields.
    A field of a level's earlier entry that this verify does not write (a generated level's `seed`,
    another tool's field) is kept."""
    methods = sorted({lm.calculation_method for lm in levels})
    before = _entries(ctx)
    entries = {}
    for lm in levels:
        key, entry = layout.level_key(lm.source), lm.entry()
        if key in before:
            written = entry.to_dict()
            entry = LevelMaxEntry.from_dict({**{k: v for k, v in before[key].items() if k not in written}, **written},
                                            layout.LEVEL_MAX_REWARDS)
        entries[key] = entry
    files.write(ctx.env.file(layout.LEVEL_MAX_REWARDS), LevelMaxRewards.build(
        ctx.env.name, entries,
        "envforge verify: validator bound and breadth-first search over snapshots with a replayed witness; "
        "methods used: " + ", ".join(methods), corrected_levels=sum(lm.corrected for lm in levels)))


def _entries(ctx: Context) -> dict[str, dict]:
    """The entries of the folder's level_max_rewards.json as written (level key -> its fields); none
    when it is missing or not readable (the verdict already names such a file)."""
    try:
        data = ctx.env.read_json(layout.LEVEL_MAX_REWARDS)
    except Exception:  # a file this verify replaces; its problems are reported where it is read
        return {}
    levels = data.get("levels") if isinstance(data, dict) else None
    return {k: v for k, v in levels.items() if isinstance(v, dict)} if isinstance(levels, dict) else {}
