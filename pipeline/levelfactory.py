"""The one way envforge makes levels from an environment's generator: N distinct levels the
validator accepts, each with a certified max reward, from a given run of seeds.

    LevelFactory(worker, seeds, certifier).make(n, exclude=...) -> Made

Seeds go to `generate_level` in order until `n` fit levels are kept or the seeds run out. A level
counts once: levels with the same canonical state hash are duplicates (a generator that ignores
its seed makes nothing else), and so is a level whose hash is in `exclude` (learn's training
levels must differ from the environment's test and validation levels). Each distinct level is
validated in the worker that made it (a state sent back through JSON would reach the validator
with its integer keys turned to strings and its tuples to lists), and the accepted ones are
certified in batches of what is still wanted (`certifier.many`), so no level past the n-th fit
one is searched. A certified level is *fit* when its `unfit` is empty.

Seeds are generated and validated on every worker the factory is given, ahead of the one being
judged (`_Ahead`: at most one seed per worker in flight), yet judged one at a time in seed order:
the same seeds tried, the same levels kept, in the same order, the same first failure raised, on
one worker or many. A seed generated ahead that the run does not reach is dropped uncounted, and
its failure is never raised. Certification starts once no generation is in flight, so it has the
workers to itself.

Used by verify's levels stage (seeds 1..max_seeds, the environment's level set, certified on its
pool of workers) and by learn's training levels (seeds from the study's seed stream, fresh each
iteration, certified one by one: `OneByOne`). The factory decides
nothing about the environment: it counts what it saw (`Made`) and the caller judges.
"""
from __future__ import annotations

import dataclasses
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Generic, Iterable, Iterator, Protocol, TypeVar

from envforge.pipeline.errors import Rejected
from envforge.pipeline.levelmax import LevelMax, Search, certify
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient, Level, Observation, Verdict

EXAMPLES = 5  # why-not examples kept (a rejected or unfit level, in words)
WARNED = 20  # levels whose validator warnings are kept


class GeneratorFailed(Exception):
    """generate_level failed in the sandbox for `seed` (the caller says whose fault that is)."""

    def __init__(self, seed: int, failure: SandboxFailure):
        super().__init__(str(failure))
        self.seed, self.failure = seed, failure


class Certified(Protocol):
    """What the factory reads and fills of a certified level (pipeline.levelmax.LevelMax): why it
    is unfit ("" when it is fit) and whether a search proves it unsolvable; the factory sets the seed,
    the state and the state hash it made it from (`dataclasses.replace`)."""

    unfit: str
    proven_unsolvable: bool
    seed: int | None
    state_hash: str


C = TypeVar("C", bound=Certified)


class Certifier(Protocol[C]):
    """Certifies levels: [(source, the validator's verdict)] -> a certified level for each, in order,
    or None for a level that cannot be scored on (learn's certifier: its witness did not replay)."""

    def many(self, items: list[tuple[str, Verdict]]) -> list[C | None]: ...


@dataclass
class Made(Generic[C]):
    """What one `make` saw and kept."""

    kept: list[C] = field(default_factory=list)  # the fit levels, in seed order (seed, state set)
    seeds_tried: int = 0
    duplicates: int = 0  # equal to a level made before, or to one in `exclude`
    distinct: int = 0
    rejected_by_validator: int = 0
    unfit: int = 0
    uncertified: int = 0  # the certifier could not score on them (None)
    unsolvable: list[C] = field(default_factory=list)  # unfit, and an exhaustive search proves it
    examples: list[str] = field(default_factory=list)
    validator_warnings: dict[str, list[str]] = field(default_factory=dict)  # on levels it accepted

    def example(self, text: str) -> None:
        if len(self.examples) < EXAMPLES:
            self.examples.append(text)


class LevelFactory(Generic[C]):
    """`workers` (one, or a list: every core) make and validate levels; `certifier` certifies them
    (sharing those workers or not). `validate(worker, what)`: the validator's verdict on the level
    just made in `worker` (the caller says how a validator that fails is reported); by default the
    worker's own `validate`."""

    def __init__(self, workers: EnvClient | list[EnvClient], seeds: Iterable[int], certifier: Certifier[C],
                 validate: Callable[[EnvClient, str], Verdict] | None = None):
        self.workers = list(workers) if isinstance(workers, (list, tuple)) else [workers]
        self.seeds, self.certifier = seeds, certifier
        self.validate = validate or (lambda w, _: w.validate())

    def make(self, n: int, exclude: Iterable[str] = (), chance: bool = False, made: Made[C] | None = None) -> Made[C]:
        """Up to `n` fit levels (fewer when the seeds run out: `len(made.kept) < n`). `chance`: the
        environment draws random numbers during step, so a search over one chance outcome proves no
        level unsolvable. `made`: counts kept as they grow (a caller reporting them when the
        generator fails mid-way passes its own)."""
        made = made if made is not None else Made()
        seen = set(exclude)
        exhausted = False
        with _Ahead(self, iter(self.seeds)) as ahead:
            while len(made.kept) < n and not exhausted:
                batch: list[tuple[int, str, object, Verdict]] = []
                while len(made.kept) + len(batch) < n:
                    made_one = ahead.next()
                    if made_one is None:
                        exhausted = True
                        break
                    seed, first, verdict = made_one
                    made.seeds_tried += 1
                    if isinstance(first, SandboxFailure):
                        raise GeneratorFailed(seed, first)
                    if first.state_hash in seen:
                        made.duplicates += 1
                        continue
                    seen.add(first.state_hash)
                    made.distinct += 1
                    if isinstance(verdict, BaseException):  # the caller's validate raised: its report
                        raise verdict
                    if verdict.ok and verdict.warnings and len(made.validator_warnings) < WARNED:
                        made.validator_warnings[f"seed {seed}"] = verdict.warnings[:5]
                    if not verdict.ok:
                        made.rejected_by_validator += 1
                        made.example(f"seed {seed}: rejected by the validator: "
                                     f"{'; '.join(verdict.issues) or 'no reason given'}")
                        continue
                    batch.append((seed, first.state_hash, first.level_text or first.state, verdict))
                if not batch:
                    continue
                ahead.settle()  # the certifier's searches run on the same workers
                certified = self.certifier.many([(str(Level(seed=s)), verdict) for s, _, _, verdict in batch])
                for (seed, digest, state, _), lm in zip(batch, certified):
                    if lm is None:
                        made.uncertified += 1
                        continue
                    lm = dataclasses.replace(lm, seed=seed, state=state, state_hash=digest)
                    if lm.unfit:
                        made.unfit += 1
                        made.example(f"seed {seed}: {lm.unfit}")
                        if lm.proven_unsolvable and not chance:  # one chance outcome proves nothing
                            made.unsolvable.append(lm)
                    else:
                        made.kept.append(lm)
        return made


Generated = tuple[int, Observation | SandboxFailure, Verdict | BaseException | None]


class _Ahead:
    """Seeds generated and validated on every worker, handed out one at a time in seed order
    (`next`): (seed, the first observation or the generator's failure, the validator's verdict or
    what `validate` raised; None after a failure). At most one seed per worker is in flight."""

    def __init__(self, factory: LevelFactory, seeds: Iterator[int]):
        self.factory, self.seeds = factory, seeds
        self.free: queue.Queue[EnvClient] = queue.Queue()
        for worker in factory.workers:
            self.free.put(worker)
        self.pool = ThreadPoolExecutor(len(factory.workers), thread_name_prefix="generate")
        self.flight: list[Future] = []  # in seed order

    def __enter__(self) -> "_Ahead":
        return self

    def __exit__(self, *_) -> None:
        self.settle()
        self.pool.shutdown()

    def next(self) -> Generated | None:
        while len(self.flight) < len(self.factory.workers):
            seed = next(self.seeds, None)
            if seed is None:
                break
            self.flight.append(self.pool.submit(self._one, seed))
        return self.flight.pop(0).result() if self.flight else None

    def settle(self) -> None:
        """Wait for the seeds in flight (kept, in order, for `next`): the workers are free after it."""
        for future in self.flight:
            future.exception()

    def _one(self, seed: int) -> Generated:
        worker = self.free.get()
        try:
            try:
                first = worker.reset(Level(seed=seed), want_state=True)
            except SandboxFailure as f:
                return seed, f, None
            try:  # in the worker that made it: the state as the generator made it (see the module docstring)
                return seed, first, self.factory.validate(worker, f"the level generated with seed {seed}")
            except Exception as e:  # noqa: BLE001 - raised in seed order by `make`, if the run gets there
                return seed, first, e
        finally:
            self.free.put(worker)


class OneByOne:
    """Certifies levels one at a time in one worker, each with the whole search of `search`
    (pipeline.levelmax.certify, as verify certifies a level); a level whose witness does not replay
    is no level to score on (None), not a verdict on the environment. Learn's training levels."""

    def __init__(self, search: Search, worker: EnvClient):
        self.search, self.worker = search, worker

    def many(self, items: list[tuple[str, Verdict]]) -> list[LevelMax | None]:
        out: list[LevelMax | None] = []
        for source, verdict in items:
            try:
                out.append(certify(self.search, self.worker, source, verdict.max_reward, verdict.state_hash))
            except Rejected:
                out.append(None)
        return out
