"""What a reviewer does to an environment: accept or reject it by hand, or retry it from a stage.

Each moves the theme's folder with one rename at a time (never leaving a half-written folder
among the accepted ones), through the same packaging code `envforge generate` uses, and
records the step in the run database as a run of its own.

A human decision is kept in manifest.json as `human_review: {decision, reason, at}`. The
pipeline's own verdict stays readable: a folder accepted by hand keeps the rejection.json the
pipeline wrote; one rejected by hand keeps the manifest of its acceptance. Deciding the way the
pipeline did undoes an override.
"""
from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline import layout, manifest, quoting
from envforge.pipeline.errors import Rejected, UserError
from envforge.pipeline.generate import package, stages
from envforge.pipeline.generate.context import GenerateRunOptions, ThemeContext
from envforge.pipeline.generate.dsl import config_errors
from envforge.pipeline.generate.journal import JournaledClient
from envforge.pipeline.generate.run import Run, ThemeOutcome
from envforge.pipeline.generate.themes import Theme
from envforge.pipeline.generate.verify_stage import OUTPUTS as VERIFY_OUTPUTS
from envforge.pipeline.kinds import HumanReview, Rejection, ThemeRecord
from envforge.pipeline.review.catalog import Catalog, Entry, model_calls, read_record

RETRY_STAGES = stages.NAMES


def decide(catalog: Catalog, name: str, decision: str, reason: str) -> Entry:
    """Accept or reject `name` by hand; returns the entry as it now is."""
    assert decision in ("accepted", "rejected")
    if not reason.strip():
        raise UserError("--reason: expected a few words saying why (they are kept in the manifest), found nothing")
    entry = catalog.get(name)
    if entry.status not in ("accepted", "rejected") or entry.place not in ("accepted", "rejected"):
        raise UserError(f"{name} is {entry.status or 'unknown'} (folder: {entry.folder or 'missing'}); only a finished "
                        f"environment can be accepted or rejected: finish it with `envforge generate --resume` or "
                        f"`envforge review retry {quoting.shell(name)} --from STAGE`")
    if entry.status == decision:
        raise UserError(f"{name} is already {entry.label}" + (f" ({entry.reason})" if entry.reason else ""))
    undo = entry.by_hand  # deciding as the pipeline did
    if decision == "accepted":
        problems = config_errors(entry.path)  # packaging would refuse it: say so before anything moves
        if problems:
            config = entry.path / layout.CONFIG
            raise UserError(f"{name}: cannot be accepted: {config} fails `envforge dsl check` ({len(problems)} "
                            f"error(s); first: {problems[0]}); fix it and run `envforge review retry "
                            f"{quoting.shell(name)} --from verify`, or retry --from dsl")
    out, db = catalog.out, catalog.db
    work = _to_work(catalog, entry)
    theme = _theme(work, entry)
    at = time.strftime("%Y-%m-%d %H:%M:%S")
    # Every hand decision is kept, the earlier ones under "history"; the pipeline's verdict beside it.
    earlier = entry.human
    history = (
        [*earlier.history, {"decision": earlier.decision, "reason": earlier.reason, "at": earlier.at}]
        if earlier
        else []
    )
    review = HumanReview(decision, reason.strip(), at, entry.machine_status, history)
    manifest.decided(work, review)
    # The level count and seed pass on, so a later retry verifies as the generate run did.
    previous = db.run_args(name)
    run_id = db.start_run({"command": f"review {decision[:-2]}", "name": name, "reason": reason.strip(),
                           "levels": previous.get("levels"), "seed": previous.get("seed")})
    if decision == "accepted":
        record = db.stage_record(name)
        if undo:
            (work / layout.REJECTION).unlink(missing_ok=True)  # it was the hand rejection
        ctx = ThemeContext(theme, work, None, GenerateRunOptions(seed=int(previous.get("seed") or 0),
                                                                   model=manifest.read(work).model or _model(work)))
        package.accept(ctx, out, record, human_review=review)
        stage, why = (entry.stage, f"accepted by hand: {reason.strip()}") if not undo else ("package", "accepted")
        db.set_theme(run_id, name, theme.text, theme.where, decision, stage, why)
    else:
        if undo:  # the pipeline's rejection, kept when it was accepted by hand
            machine = read_record(work / layout.REJECTION, Rejection)
            rejection = Rejected(machine.reason, machine.stage, machine.details, machine.cause) if machine \
                else Rejected("", entry.stage)
        else:
            rejection = Rejected(f"rejected by hand: {reason.strip()}", "review")
        package.reject(work, out, theme, rejection, db, run_id)
    attempt = db.start_stage(run_id, name, "review")
    db.end_stage(attempt, f"{decision} by hand" if not undo else f"{decision} (override undone)", reason.strip())
    db.finish_run(run_id, "finished", {"name": name, "decision": decision, "undo": undo})
    return catalog.get(name)


@dataclass
class RetryPlan:
    entry: Entry
    start: str  # the first stage to run again
    stages: tuple[str, ...]  # it and every later stage

    @property
    def needs_model(self) -> bool:
        return any(stages.get(name).needs_model for name in self.stages)


def plan_retry(catalog: Catalog, name: str, start: str) -> RetryPlan:
    """Check that `name` can be retried from `start`, before anything is moved or a client built."""
    entry = catalog.get(name)
    if start not in RETRY_STAGES:
        raise UserError(f"--from {start}: expected one of {', '.join(RETRY_STAGES)}")
    if not entry.folder:
        raise UserError(f"{name}: expected its folder under {catalog.out.root}, found none (was it moved or deleted?)")
    for earlier in (s.name for s in stages.before(start)):
        if not catalog.db.stage_done(name, earlier):
            raise UserError(f"{name}: --from {start} keeps the stages before it, but {earlier} has not passed "
                            f"(it stopped at {entry.stage or 'an earlier stage'}); retry --from {earlier} or an "
                            f"earlier stage")
    if not stages.writes_config(start):
        config = entry.path / layout.CONFIG
        problems = config_errors(entry.path)
        if problems:
            raise UserError(f"{config}: expected a valid DSL document before retrying --from {start}, found "
                            f"{len(problems)} error(s); first: {problems[0]}; fix it (`envforge dsl check {config}`) "
                            f"or retry --from dsl")
    return RetryPlan(entry, start, tuple(s.name for s in stages.after(start)))


async def retry(catalog: Catalog, plan: RetryPlan, client) -> ThemeOutcome:
    """Run the theme again from `plan.start` with the files as they are now. `client` is None
    when no model stage runs (a retry from verify)."""
    name, out, db = plan.entry.name, catalog.out, catalog.db
    work = _to_work(catalog, plan.entry)
    for output in (layout.REJECTION, *VERIFY_OUTPUTS):
        target = work / output
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
    db.forget_stages(name, plan.stages)
    journal = JournaledClient(client, work / layout.CALL_JOURNAL, name)
    for stage in plan.stages:
        journal.restart(stage)
    previous = db.run_args(name)
    options = GenerateRunOptions(levels=int(previous.get("levels") or 15), seed=int(previous.get("seed") or 0),
                                 model=client.spec if client else _model(work))
    run_id = db.start_run({"command": "review retry", "name": name, "from": plan.start, "levels": options.levels,
                           "seed": options.seed, "model": options.model})
    job = Run(client, out, options, db, run_id, 1)
    try:
        return await job.theme(_theme(work, plan.entry), resume=True)
    finally:
        db.finish_run(run_id, "finished", job.summary())


def _to_work(catalog: Catalog, entry: Entry) -> Path:
    """Move the folder back to OUT/_work/<name> (one rename), where the pipeline works on it."""
    if entry.place == "work":
        return catalog.out.work(entry.name)
    return package.back_to_work(entry.path, catalog.out, entry.name)


def _theme(work: Path, entry: Entry) -> Theme:
    record = read_record(work / layout.THEME_FILE, ThemeRecord)
    if record is None:
        return Theme(entry.name, entry.theme, entry.source)
    return Theme.from_record(dataclasses.replace(record, name=entry.name, theme=record.theme or entry.theme,
                                                 where=record.where or entry.source))


def _model(work: Path) -> str:
    """The model that wrote the environment: the latest response in its call journal."""
    model = ""
    for entry in model_calls(work):
        model = str(entry.response.get("model") or "") or model
    return model

