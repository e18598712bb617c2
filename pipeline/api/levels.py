"""A level set in a difficulty band from an environment's generator: the library call under
`envforge levels`.

    LevelsJob(env_dir, LevelsOptions(n=10, band="hard", out="hard_set")).run() -> LevelSet
    make_level_set(env_dir, n, band, seed, out, verify_options) -> LevelSet      (the work)

Candidates come from verify's own path, in batches: a copy of the environment with no levels is
verified with `write_levels` (pipeline/verify/: the generator run by seed in the sandbox, each level
validated, de-duplicated by state, its max certified, its difficulty profiled by the reliability
stage: pipeline/difficulty.py), seeds `seed + 1, seed + 2, ...` in order, a batch of `batch` levels
at a time, until `n` distinct levels score inside the band or MAX_BATCHES batches are spent. The
first `n` in seed order are chosen; a band the generator does not reach is an error naming the
scores it reached. The chosen levels become the test split (levels/level_01.yaml, ...) of a copy
of the environment, which verify then checks and certifies whole (its writer of
level_max_rewards.json, with each level's profile), so the folder is one every command takes.
Nothing depends on the clock: the same arguments give the same folder.
"""
from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from envforge.pipeline import difficulty, layout, safe_io
from envforge.pipeline import records as files
from envforge.pipeline.api.export import copy_folder
from envforge.pipeline.api.options import ExecutorOptions, Options, group, option
from envforge.pipeline.api.values import COUNT, SEED, out_dir
from envforge.pipeline.difficulty import BANDS, PROFILE_NODES
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.kinds import LevelMaxRewards
from envforge.pipeline.levelmax import SEARCH_NODES
from envforge.pipeline.sandbox.outside.executor import running_on
from envforge.pipeline.verify import VerifyRunOptions, verify_env


@dataclasses.dataclass(frozen=True)
class LevelsOptions(Options):
    n: int = option(10, COUNT, metavar="N", help="levels to write (default {default})")
    band: str | None = option(None, metavar="BAND", help=f"the difficulty band: {', '.join(BANDS)} "
                              f"({', '.join(f'{k} {lo}..{hi}' for k, (lo, hi) in BANDS.items())} of the "
                              "difficulty score) or a score range LO..HI (required)")
    seed: int = option(0, SEED, help="the generator's seeds are SEED+1, SEED+2, ... (default {default})")
    out: str | None = option(None, out_dir, metavar="DIR", help="the environment folder to write (required; new "
                             "or empty)")
    batch: int | None = option(None, COUNT, metavar="N", help="candidate levels verified at a time (default "
                               "twice N, at least 10)")
    search_nodes: int = option(SEARCH_NODES, COUNT, help="search budget per level, in nodes, for its certified "
                               "max (default {default})")
    profile_nodes: int = option(PROFILE_NODES, COUNT, help="breadth-first budget per level, in nodes, for its "
                                "difficulty profile (default {default})")
    random_episodes: int = option(5, COUNT, help="random-agent episodes per level (default {default})")
    executor: ExecutorOptions = group(ExecutorOptions)


class LevelsJob:
    """One level set to make, checked before anything runs (UserError for bad input)."""

    def __init__(self, env_dir: str, options: LevelsOptions, progress: Callable[[str], None] | None = None):
        if options.band is None:
            raise UserError("expected --band easy|medium|hard|LO..HI")
        if options.out is None:
            raise UserError("expected --out DIR, the environment folder to write")
        EnvSpec.open(env_dir, full_paths=False).playable()  # a LocatedError names the file
        self.env_dir, self.options = env_dir, options
        self.executor = options.executor.start()
        self.verify = VerifyRunOptions(search_nodes=options.search_nodes, profile_nodes=options.profile_nodes,
                                       random_episodes=options.random_episodes, progress=progress)

    def run(self) -> LevelSet:
        o = self.options
        with running_on(self.executor):
            return make_level_set(self.env_dir, o.n, o.band, o.seed, o.out, self.verify, batch=o.batch)


MAX_BATCHES = 8  # candidate batches before a band is called unreachable
CLEARED = (layout.LEVEL_MAX_REWARDS, layout.VERIFICATION, layout.MANIFEST)


@dataclasses.dataclass
class Candidate:
    seed: int
    text: str  # the level's YAML, as the generator's worker wrote it
    score: int
    band: str


@dataclasses.dataclass
class LevelSet:
    out: Path
    band: str
    scores: tuple[int, int]  # the band's score range
    chosen: list[Candidate]
    candidates: int  # distinct profiled levels seen
    seeds: tuple[int, int]  # the seeds tried, first and last
    reached: tuple[int, int]  # the lowest and highest score among the candidates
    final_scores: dict[str, int]  # the written level -> its score as verify profiled it in the folder

    @property
    def outside(self) -> dict[str, int]:
        """Written levels whose profile in the folder scores outside the band: the random agent's episodes are
        seeded by the level's file name, so a level's random figures (and score) can differ in its new place."""
        lo, hi = self.scores
        return {k: v for k, v in self.final_scores.items() if not lo <= v <= hi}

    def summary(self) -> str:
        lo, hi = self.scores
        moved = (f"; {len(self.outside)} of them score outside the band in this folder, where the random agent's "
                 f"episodes differ (seeded by the level's file): " + ", ".join(f"{k} {v}" for k, v in
                                                                               self.outside.items())
                 if self.outside else "")
        return (f"{len(self.chosen)} level(s) in band {self.band} ({lo}..{hi}) -> {self.out}: scores "
                f"{', '.join(str(s) for s in self.final_scores.values())}; chosen from {self.candidates} distinct "
                f"levels of seeds {self.seeds[0]}..{self.seeds[1]} (scores {self.reached[0]}..{self.reached[1]})"
                + moved)


class BandUnreachable(UserError):
    """The generator made too few levels in the band (the message names the scores it reached)."""


def make_level_set(env_dir: str | Path, n: int, band: str, seed: int, out: str | Path,
                   options: VerifyRunOptions, batch: int | None = None) -> LevelSet:
    try:
        scores = difficulty.band_range(band)
    except ValueError as e:
        raise UserError(f"--band: {e}") from None
    source, target = Path(env_dir), Path(out)
    if target.exists() and any(target.iterdir()):
        raise UserError(f"--out {out}: expected a new or empty folder, found one holding files")
    target.parent.mkdir(parents=True, exist_ok=True)
    batch = batch or max(2 * n, 10)
    with tempfile.TemporaryDirectory(prefix=".envforge-levels-", dir=target.parent) as work:
        candidates, first = _candidates(source, Path(work), n, scores, seed, batch, options)
        lo, hi = scores
        inside = [c for c in candidates if lo <= c.score <= hi]
        reached = (min((c.score for c in candidates), default=0), max((c.score for c in candidates), default=0))
        if len(inside) < n:
            raise BandUnreachable(
                f"band {band} ({lo}..{hi}): expected {n} distinct levels scoring in it from the generator of "
                f"{env_dir}, "
                f"found {len(inside)}: the {len(candidates)} distinct levels of seeds {seed + 1}..{first - 1} score "
                + (f"{reached[0]}..{reached[1]}" if candidates else "nothing (none was profiled)"))
        chosen = inside[:n]
        final = Path(work) / "final"
        _copy_without_levels(source, final)
        for i, c in enumerate(chosen):
            files.write_text(final / layout.LEVELS / f"level_{i + 1:02d}.yaml", c.text)
        result = verify_env(final, options=dataclasses.replace(options, write=True, write_levels=False,
                                                               test_levels=min(n, 5), val_levels=0))
        if not result.accepted:
            raise UserError(f"{env_dir}: expected verify to accept the chosen levels of band {band}, found "
                            f"{result.reason}")
        written = files.read(final / layout.LEVEL_MAX_REWARDS, LevelMaxRewards)
        final_scores = {k: e.difficulty.score for k, e in written.levels.items() if e.difficulty is not None}
        if target.exists():
            target.rmdir()
        shutil.move(str(final), str(target))
    return LevelSet(target, band, scores, chosen, len(candidates), (seed + 1, first - 1), reached, final_scores)


def _candidates(source: Path, work: Path, n: int, scores: tuple[int, int], seed: int, batch: int,
                options: VerifyRunOptions) -> tuple[list[Candidate], int]:
    """Distinct profiled levels of seeds seed+1, ... in seed order, batch by batch until n score in the
    band; and the next seed not tried."""
    out, seen, first = [], set(), seed + 1
    for number in range(MAX_BATCHES):
        folder = work / f"batch_{number + 1}"
        _copy_without_levels(source, folder)
        opts = dataclasses.replace(options, write=True, write_levels=True, test_levels=batch, val_levels=0,
                                   max_seeds=3 * batch, first_seed=first)
        result = verify_env(folder, stages=("levels", "reliability"), options=opts)
        levels = result.stages.levels
        if not result.accepted and not (levels and levels.generated_kept):
            raise UserError(f"{source}: expected its generator to make levels from seeds {first}.., found "
                            f"{result.reason}")
        if not result.accepted:
            raise UserError(f"{source}: expected verify to accept the candidate levels of seeds "
                            f"{first}..{first + levels.seeds_tried - 1}, found {result.reason}")
        first += levels.seeds_tried
        written = files.read(folder / layout.LEVEL_MAX_REWARDS, LevelMaxRewards)
        for key, entry in written.levels.items():
            if entry.difficulty is None or not safe_io.is_file(folder / layout.LEVELS, key):
                continue
            text = safe_io.read_text(folder / layout.LEVELS, key)
            if text in seen:
                continue
            seen.add(text)
            out.append(Candidate(entry.seed, text, entry.difficulty.score, entry.difficulty.band))
        if sum(scores[0] <= c.score <= scores[1] for c in out) >= n or levels.generated_kept < batch:
            break
    return out, first


def _copy_without_levels(source: Path, target: Path) -> None:
    """The environment's files without its levels and the records verify writes afresh."""
    copy_folder(source, target)
    for folder in (layout.LEVELS, layout.VAL_LEVELS):
        shutil.rmtree(target / folder, ignore_errors=True)
        (target / folder).mkdir()
    for name in CLEARED:
        (target / name).unlink(missing_ok=True)
