"""Stage 6, package: an accepted theme's folder becomes OUT/<name>/ with manifest.json; a rejected
one becomes OUT/_rejected/<name>/ with rejection.json. Each is one rename of the work folder,
so a run killed at any instant leaves no half-written folder among the accepted ones."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from envforge.pipeline import layout, manifest
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.spec import config_tags, read_config
from envforge.pipeline.errors import LocatedError, Rejected, UserError
from envforge.pipeline.generate.context import ThemeContext
from envforge.pipeline.generate.dsl import config_errors
from envforge.pipeline.generate.rundb import RunDB
from envforge.pipeline.generate.themes import Theme
from envforge.pipeline.kinds import EnvOrigin, Generated, HumanReview, Rejection, RejectionCause

LOG_EXCERPT_LINES = 12


def accept(ctx: ThemeContext, out: layout.OutputDir, record: dict, human_review: HumanReview | None = None) -> Path:
    """`human_review`: the decision of `envforge review accept` (the pipeline's own verdict has none).
    The DSL gate is run again first: no accepted environment fails `envforge dsl check` (a Rejected
    at the dsl stage otherwise, and nothing is moved)."""
    gate(ctx.work)
    config_tags = _config_tags(ctx.work)
    manifest.packaged(ctx.work, EnvOrigin(ctx.theme.name, ctx.theme.text, {**config_tags, **ctx.theme.tags},
                                          manifest.GENERATED),
                      Generated.of(ctx.options.model, ctx.options.seed, record["stages"]),
                      human_review)  # verification wrote its part before
    return _move(ctx.work, out.accepted(ctx.theme.name))


def gate(work: Path) -> None:
    """The strict DSL check of config.yaml, as packaging runs it again."""
    problems = config_errors(work)
    if problems:
        raise Rejected(f"config.yaml fails `envforge dsl check` when packaged: {len(problems)} error(s); "
                       f"first: {problems[0]}", "dsl", {"problems": [str(p) for p in problems]})


def reject(work: Path, out: layout.OutputDir, theme: Theme, rejection: Rejected, db: RunDB, run_id: int) -> Path:
    """The one writer of a rejection (the pipeline's, or a reviewer's): rejection.json in the work
    folder, the folder moved to OUT/_rejected/<name>, then the theme's row in the run database; both
    records carry the rejection's typed cause (`Rejected.cause`, when it is one) beside its reason."""
    cause = rejection.cause if isinstance(rejection.cause, RejectionCause) else None
    work.mkdir(parents=True, exist_ok=True)
    files.write(work / layout.REJECTION, Rejection(theme.name, rejection.stage, rejection.reason,
                                                   rejection.details or {}, db.stage_record(theme.name)["stages"],
                                                   _log_excerpt(work / layout.TRAJECTORY),
                                                   time.strftime("%Y-%m-%d %H:%M:%S"), cause))
    path = _move(work, out.rejected(theme.name))
    db.set_theme(run_id, theme.name, theme.text, theme.where, "rejected", rejection.stage, rejection.reason, cause)
    return path


def back_to_work(folder: Path, out: layout.OutputDir, name: str) -> Path:
    """Move a theme's accepted or rejected folder back to OUT/_work/<name> (one rename), where the
    pipeline works on it again (`review retry`, or `--resume` of a theme a budget stopped)."""
    work = out.work(name)
    if folder == work:
        return work
    if work.exists():
        raise UserError(f"{work}: expected no work folder for {name} while its folder is {folder}, found one; "
                        f"remove whichever is stale")
    work.parent.mkdir(parents=True, exist_ok=True)
    os.replace(folder, work)
    return work


def _move(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # an earlier attempt of the same theme (a retry) is replaced
        shutil.rmtree(target)
    shutil.rmtree(source / layout.GENERATED_LEVELS, ignore_errors=True)
    os.replace(source, target)
    return target


def _config_tags(work: Path) -> dict:
    """config.yaml's meta.tags ({} when the file cannot be read: the DSL stage reported that)."""
    try:
        return config_tags(read_config(work))
    except LocatedError:
        return {}


def _log_excerpt(trajectory: Path) -> list[str]:
    if not trajectory.exists():
        return []
    return trajectory.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_EXCERPT_LINES:]

