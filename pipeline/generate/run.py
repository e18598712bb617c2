"""`envforge generate`: every theme through the stages of pipeline/generate/stages.py, then package.

Themes run concurrently; each stage writes its artefacts to the theme's work folder and is
recorded in the run database before the next starts, so `--resume` continues where a run
stopped. Model calls go through the theme's call journal, so none is made twice.

A theme ends accepted, rejected (a verdict on the environment, counted in Table 2), paused,
skipped, or in error: an infrastructure fault (no recording for it, a template missing from the
installation, a bug in envforge) says nothing about the environment and is not counted.
"""
from __future__ import annotations

import contextlib
import re
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from envforge.pipeline import __version__, difficulty, layout
from envforge.pipeline import records as files
from envforge.pipeline.errors import DiskFull, InfrastructureError, Rejected, Unwritable, UserError
from envforge.pipeline.generate import package, stages
from envforge.pipeline.generate.context import GenerateRunOptions, StageReport, ThemeContext
from envforge.pipeline.generate.journal import JournaledClient
from envforge.pipeline.generate.rundb import RunDB
from envforge.pipeline.generate.themes import Theme
from envforge.pipeline.kinds import BudgetCapReached
from envforge.pipeline.llm.client import LLMClient
from envforge.pipeline.llm.errors import BudgetExceeded, LLMError, ReplayInvalid, ReplayMissing
from envforge.pipeline.sandbox.outside.executor import INFRASTRUCTURE_RETRIES, infrastructure_errors
from envforge.pipeline.terminal import StatusLine, in_notebook
from envforge.pipeline.verify.dynamics import dynamics_of, same_dynamics
from envforge.pipeline.verify.models import ModelChecks

# Faults of the installation or of the recordings, not of the environment being made.
INFRASTRUCTURE = (ReplayMissing, ReplayInvalid, jinja2.TemplateError, UserError)


class Broken(Exception):
    """A theme could not go on for a reason that is not the environment's: an error, not a verdict."""

    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage, self.reason = stage, reason


@dataclass
class ThemeOutcome:
    name: str
    status: str  # accepted | rejected | error | paused | skipped
    stage: str = ""
    reason: str = ""
    path: str = ""
    budget_stop: bool = False  # rejected only because the run's budget stopped it: not judged


@dataclass
class Run:
    # None when no model stage will run (`envforge review retry --from verify`): a retry that only
    # re-verifies edited files must work without a provider configured.
    client: LLMClient | None
    out: layout.OutputDir
    options: GenerateRunOptions
    db: RunDB
    run_id: int
    total: int
    outcomes: list[ThemeOutcome] = field(default_factory=list)
    stopped: str = ""  # why remaining themes were not started
    journals: list[JournaledClient] = field(default_factory=list)
    verifiers: ModelChecks | None = None  # the model-driven verification, when models are configured
    active: dict[str, str] = field(default_factory=dict)  # theme -> the stage it is in now
    status: StatusLine | None = None  # progress redrawn on one line (a notebook cell)
    unserved: dict[str, str] = field(default_factory=dict)  # theme -> why replay has no recording of it
    kept: list[str] = field(default_factory=list)  # "theme (stage)": stages an interrupt waited for, recorded

    # -- progress ----------------------------------------------------------------------
    def say(self, name: str, what: str, kept: bool = False) -> None:
        """A theme's progress (`kept`: an outcome, which stays on screen). In a notebook cell, progress
        is one line redrawn and outcomes stay above it; elsewhere a line each."""
        done = len(self.outcomes)
        accepted = sum(o.status == "accepted" for o in self.outcomes)
        spent = self.client.ledger.run.cost_usd if self.client else 0.0
        line = f"[{done}/{self.total} done, {accepted} accepted, ${spent:.2f}] {name}: {what}"
        if self.status is None and in_notebook(sys.stderr):
            self.status = StatusLine(sys.stderr)
        if self.status is None:
            print(line, file=sys.stderr, flush=True)
        else:
            (self.status.keep if kept else self.status.show)(line)

    # -- one theme -----------------------------------------------------------------------
    async def theme(self, theme: Theme, resume: bool) -> ThemeOutcome:
        if self.stopped:
            return self._finish(ThemeOutcome(theme.name, "skipped", reason=self.stopped))
        done = self._already_packaged(theme.name) if resume else None
        if done:
            return self._finish(done)
        work = self.out.work(theme.name)
        work.mkdir(parents=True, exist_ok=True)
        self.db.set_determined_by(theme.name, determined_by(theme, self.options, self.verifiers))
        files.write(work / layout.THEME_FILE, theme.record())
        if theme.problem:
            return self._reject(theme, work, Rejected(theme.problem, stages.INPUT))
        if theme.name in self.unserved and not (work / layout.CALL_JOURNAL).exists():
            # Replay said so before the run (api/generate.py): an error, not a verdict, and no stage to run.
            reason = _infrastructure(theme, ReplayMissing(self.unserved[theme.name], ""))
            first = stages.STAGES[0].name
            self.db.set_theme(self.run_id, theme.name, theme.text, theme.where, "error", first, reason)
            return self._finish(ThemeOutcome(theme.name, "error", first, reason, str(work)))
        journal = JournaledClient(self.client, work / layout.CALL_JOURNAL, theme.name, theme.text)
        self.journals.append(journal)
        ctx = ThemeContext(theme, work, journal, self.options, self.verifiers)
        previous = self.db.theme(theme.name) or {}
        self.db.set_theme(self.run_id, theme.name, theme.text, theme.where, "running")
        try:
            paused = stages.get(previous["stage"]) if previous.get("status") == "paused" and \
                previous.get("stage") in stages.NAMES else None
            if paused and paused.after_edit and (wrong := paused.after_edit(ctx)):
                # The person's edit, not the model's work: the theme stays paused, nothing is judged.
                self.db.set_theme(self.run_id, theme.name, theme.text, theme.where, "paused", paused.name, wrong)
                self.say(theme.name, f"still paused after {paused.name}: {wrong}; fix it, then --resume", kept=True)
                return self._finish(ThemeOutcome(theme.name, "paused", paused.name, wrong, str(work)))
            for stage in stages.STAGES:
                if self.db.stage_done(theme.name, stage.name):
                    continue
                await self._stage_anywhere(ctx, stage)
                ctx.go_on()  # interrupted while it ran: what it found is recorded; nothing more starts
                if self.options.pause_after == stage.name:
                    self.db.set_theme(self.run_id, theme.name, theme.text, theme.where, "paused", stage.name,
                                      f"paused after {stage.name}: edit {work} and run again with --resume")
                    self.say(theme.name, f"paused after {stage.name} (edit {work}, then --resume)", kept=True)
                    return self._finish(ThemeOutcome(theme.name, "paused", stage.name, path=str(work)))
        except Rejected as rejection:
            return self._reject(theme, work, rejection)
        except Broken as broken:
            self.db.set_theme(self.run_id, theme.name, theme.text, theme.where, "error", broken.stage, broken.reason)
            self.say(theme.name, f"error in {broken.stage}: {broken.reason}", kept=True)
            return self._finish(ThemeOutcome(theme.name, "error", broken.stage, broken.reason, str(work)))
        try:
            path = package.accept(ctx, self.out, self._record(theme.name))
        except Rejected as rejection:  # the DSL gate, run again at packaging
            return self._reject(theme, work, rejection)
        self.db.set_theme(self.run_id, theme.name, theme.text, theme.where, "accepted", "package", "accepted")
        self.say(theme.name, f"accepted -> {path}", kept=True)
        return self._finish(ThemeOutcome(theme.name, "accepted", path=str(path)))

    async def _stage_anywhere(self, ctx: ThemeContext, stage: stages.Stage) -> StageReport:
        """The stage, run again (as a new attempt in the run database) when the node running its
        sandboxed work is lost; model calls are journaled, so a retry repeats none."""
        for lost in range(INFRASTRUCTURE_RETRIES + 1):
            try:
                return await self._stage(ctx, stage)
            except infrastructure_errors() as exc:
                if lost == INFRASTRUCTURE_RETRIES:
                    raise
                self.say(ctx.theme.name, f"{stage.name}: {exc}; running it again")
        raise AssertionError("unreachable")

    async def _stage(self, ctx: ThemeContext, stage: stages.Stage) -> StageReport:
        name = ctx.theme.name
        self.say(name, f"{stage.name}...")
        ctx.progress = lambda what: self.say(name, f"{stage.name}: {what}")
        attempt = self.db.start_stage(self.run_id, name, stage.name)
        before = _theme_totals(self.client, name)
        status, error, report = "interrupted", "", StageReport("interrupted")
        self.active[name] = stage.name
        try:
            report = await stage.run(ctx)
            status = "done"
            return report
        except Rejected as rejection:
            status, error = "rejected", rejection.reason
            report.exit_status = str(rejection.details.get("exit_status") or "rejected")
            report.steps = rejection.details.get("steps")
            raise rejection.at(stage.name) from None
        except BudgetExceeded as exc:
            if exc.scope == "run":
                self.stopped = f"not started: the run budget of ${exc.cap_usd:g} was reached"
            # The run's cap says nothing of the theme: `--resume` with a bigger one goes on from here.
            # The theme's own cap is a verdict on what the theme cost (the ledger starts empty on each
            # resume, so reopening it would give the theme a fresh cap every time).
            said = str(exc)  # the ledger's message says "budget exceeded: ..." itself: once is enough
            status, error = "rejected", said if said.startswith("budget exceeded") else f"budget exceeded: {said}"
            report.exit_status = stages.RUN_BUDGET if exc.scope == "run" else stages.THEME_BUDGET
            raise Rejected(error, stage.name, cause=BudgetCapReached(exc.scope, exc.cap_usd, exc.spent_usd,
                                                               exc.estimate_usd)) from None
        except (DiskFull, Unwritable) as exc:  # the output folder's fault, not the theme's: the run stops
            status, error = "interrupted", str(exc)
            raise
        except INFRASTRUCTURE as exc:
            status, error = "error", _infrastructure(ctx.theme, exc)
            raise Broken(stage.name, error) from None
        except LLMError as exc:
            status, error = "rejected", f"model call failed: {exc}"
            raise Rejected(error, stage.name) from None
        except InfrastructureError as exc:  # the machinery failed (a lost node): the command stops, and
            # resumes (a UserError, such as a record of a newer envforge, is one of INFRASTRUCTURE above)
            status, error = "error", str(exc)
            raise
        except Exception as exc:  # a bug in envforge must not take the other themes down
            status = "error"
            error = f"internal error in stage {stage.name}: {type(exc).__name__}: {exc}"
            files.write_text(ctx.work / "error.txt", traceback.format_exc())
            raise Broken(stage.name, error) from None
        finally:
            self.active.pop(name, None)
            if ctx.interrupted and status in ("done", "rejected"):
                self.kept.append(f"{name} ({stage.name})")
            after = _theme_totals(self.client, name)
            # On a full disk the attempt stays "running" in the database, which `--resume` runs again;
            # the fault that stopped the stage is the one the user is told.
            with contextlib.suppress(DiskFull, Unwritable) if status == "interrupted" else contextlib.nullcontext():
                self.db.end_stage(attempt, status, error, after[1] - before[1], after[2] - before[2],
                                  round(after[0] - before[0], 6), report.steps, report.exit_status)

    def _reject(self, theme: Theme, work: Path, rejection: Rejected) -> ThemeOutcome:
        path = package.reject(work, self.out, theme, rejection, self.db, self.run_id)
        self.say(theme.name, f"rejected at {rejection.stage}: {rejection.reason}", kept=True)
        return self._finish(ThemeOutcome(theme.name, "rejected", rejection.stage, rejection.reason, str(path),
                                         budget_stop=_run_budget(rejection.cause)))

    def _already_packaged(self, name: str) -> ThemeOutcome | None:
        row = self.db.theme(name) or {}
        if self.out.accepted(name).is_dir() and (self.out.accepted(name) / layout.MANIFEST).is_file():
            return ThemeOutcome(name, "accepted", path=str(self.out.accepted(name)))
        if self.out.rejected(name).is_dir() and row.get("status") == "rejected":
            attempts = self.db.attempts(name)
            if not attempts or attempts[-1].get("exit_status") != stages.RUN_BUDGET:
                return ThemeOutcome(
                    name, "rejected", row.get("stage", ""), row.get("reason", ""), str(self.out.rejected(name))
                )
            # The run's budget stopped it, not a finding: it goes on from that stage, with its journal.
            work = package.back_to_work(self.out.rejected(name), self.out, name)
            (work / layout.REJECTION).unlink(missing_ok=True)
            self.say(name, f"stopped by the run budget at {attempts[-1]['stage']} before: going on from there")
        return None

    def _record(self, name: str) -> dict:
        return self.db.stage_record(name)

    def _finish(self, outcome: ThemeOutcome) -> ThemeOutcome:
        self.outcomes.append(outcome)
        if len(self.outcomes) == self.total and self.status is not None:
            self.status.close()
        return outcome

    def waiting_for(self) -> str:
        """What an interrupted run waits for, in words."""
        running = [f"{name} ({stage})" for name, stage in sorted(self.active.items())]
        return ("the stage(s) in progress: " + ", ".join(running)) if running else "the run database to close"

    # -- summary -----------------------------------------------------------------------
    def summary(self) -> dict:
        # Table 2 counts the themes judged: a theme the run's budget stopped was not (it goes on
        # from its stage on --resume), nor was one never started.
        considered = [o for o in self.outcomes if o.status in ("accepted", "rejected") and not o.budget_stop]
        n = len(considered)
        counts = stages.table2_counts([(o.status == "accepted", o.stage) for o in considered])
        rates = {column: round(c["passed"] / n, 3) if n else None for column, c in counts.items()}
        accepted = [o.name for o in self.outcomes if o.status == "accepted"]
        rates["overall"] = round(len(accepted) / n, 3) if n else None
        cost = self.client.ledger.run.cost_usd if self.client else 0.0
        return {
            "out": str(self.out.root),
            "themes": self.total,
            "accepted": accepted,
            "rejected": {
                o.name: {"stage": o.stage, "reason": o.reason} for o in self.outcomes if o.status == "rejected"
            },
            "errors": {o.name: {"stage": o.stage, "reason": o.reason} for o in self.outcomes if o.status == "error"},
            "paused": [o.name for o in self.outcomes if o.status == "paused"],
            # paused themes whose files a person edited into something invalid: theirs to fix, not a verdict
            "edit_errors": {o.name: o.reason for o in self.outcomes if o.status == "paused" and o.reason},
            "skipped": {o.name: o.reason for o in self.outcomes if o.status == "skipped"},
            "not_judged": [o.name for o in self.outcomes if o.budget_stop],
            "rates": rates,
            "model_calls": {
                "made": self.client.ledger.run.calls if self.client else 0,
                "from_journal": sum(j.served for j in self.journals),
                # replies whose usage was forged, missing or implausibly low (those counted apart too),
                # and billed replies we could not use: each was charged at least its reservation
                # (pipeline/llm/ledger.py)
                "untrusted_usage": self.client.ledger.run.untrusted if self.client else 0,
                "implausible_usage": self.client.ledger.run.implausible_usage if self.client else 0,
                "unusable_replies": self.client.ledger.run.unparsed if self.client else 0,
            },
            "cost_usd": round(cost, 6),
            "cost_per_accepted_usd": round(cost / len(accepted), 6) if accepted else None,
            "stopped": self.stopped,
            # stages an interrupt waited for, whose results are recorded: `--resume` does not run them again
            "kept": list(self.kept),
            # accepted environments with the same dynamics (verify's fingerprint): the same game twice
            "same_dynamics": same_dynamics((name, dynamics_of(self.out.root / name)) for name in accepted),
            # per accepted environment: its trivial levels (level -> why) and its levels by difficulty band
            "trivial_levels": {name: t for name in accepted if (t := difficulty.recorded(self.out.root / name)[0])},
            "difficulty": {name: b for name in accepted if (b := difficulty.recorded(self.out.root / name)[1])},
        }


def determined_by(theme: Theme, options: GenerateRunOptions, verifiers: ModelChecks | None) -> dict:
    """What determines a theme's result besides the model's replies: `--resume` reuses its finished
    stages (and its accepted or rejected folder) only when all of it matches (check_resume)."""
    checks = (
        [getattr(c, "spec", None) for c in (verifiers.rollout, verifiers.weak, verifiers.strong)] if verifiers else []
    )
    return {"envforge": __version__, "theme": theme.text, "model": options.model, "levels": options.levels,
            "seed": options.seed, "verify_models": checks,
            "limits": {"dsl_corrections": options.dsl_corrections, "code_steps": options.code_steps,
                       "repair_steps": options.repair_steps, "verify_search_nodes": options.verify_search_nodes}}


def check_resume(db: RunDB, out: Path, themes: list[Theme], options: GenerateRunOptions,
                 verifiers: ModelChecks | None) -> None:
    """Refuse to resume a folder whose themes were (partly) made with other settings: their stages
    would be reused and their numbers mixed with this run's. Nothing is written before this."""
    for theme in themes:
        stored = db.determined_by(theme.name)
        if stored is None:
            continue
        now = determined_by(theme, options, verifiers)
        changed = [f"{key} {stored[key]!r} (now {now[key]!r})" if key in stored else f"{key} unrecorded"
                   for key in now if stored.get(key) != now[key]]
        if changed:
            raise UserError(
                f"--resume: {theme.name} in {out} was made with other settings: {'; '.join(changed)[:300]}; "
                f"resume with the settings it was made with, or choose another --out"
            )


def _infrastructure(theme: Theme, exc: Exception) -> str:
    if isinstance(exc, jinja2.TemplateNotFound):
        return (f"the prompt template {exc.name} is missing from the envforge installation "
                f"(reinstall envforge); theme at {theme.where} not judged")
    return f"{exc} (theme at {theme.where}: {' '.join(theme.text.split())[:80]!r})"


def _run_budget(cause: object) -> bool:
    return isinstance(cause, BudgetCapReached) and cause.scope == "run"


def _theme_totals(client: LLMClient | None, name: str) -> tuple[float, int, int]:
    t = client.ledger.by_theme.get(name) if client else None
    return (t.cost_usd, t.usage.input_tokens, t.usage.output_tokens) if t else (0.0, 0, 0)


def prepare_output(root: Path, resume: bool) -> layout.OutputDir:
    out = layout.OutputDir(root.resolve())
    try:
        out.root.mkdir(parents=True, exist_ok=True)
        probe = out.root / ".envforge-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise UserError(f"--out {root}: expected a folder envforge can write, found: {e.strerror or e}") from None
    if out.db.exists() and not resume:
        raise UserError(f"--out {root}: it already holds a run ({layout.RUN_DB}); pass --resume to continue it, "
                        f"or choose another --out")
    return out


def print_summary(summary: dict, file=None) -> None:
    """The summary table on `file` (default: sys.stdout when called, not when imported: a caller
    that redirects stdout gets it)."""
    file = sys.stdout if file is None else file
    rates = summary["rates"]
    pct = lambda v: "-" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    print(f"\n{len(summary['accepted'])} of {summary['themes']} theme(s) accepted -> {summary['out']}", file=file)
    print("| execution | level generation | reliability | overall |\n| --- | --- | --- | --- |", file=file)
    print(f"| {pct(rates['execution'])} | {pct(rates['level generation'])} | {pct(rates['reliability'])} | "
          f"{pct(rates['overall'])} |", file=file)
    stopped = summary.get("not_judged", [])
    judged = len(summary["accepted"]) + len(summary["rejected"]) - len(stopped)
    errors = summary["errors"]
    left_out = (f"; {len(errors)} ended in an error, not a verdict, and are left out: {some_names(list(errors))}"
                if errors else "")
    left_out += (f"; {len(stopped)} stopped by the run budget are left out (--resume with a larger --budget-usd goes "
                 f"on from where each stopped)" if stopped else "")
    print(f"(over the {judged} theme(s) judged{left_out})", file=file)
    for name, r in summary["rejected"].items():
        if name in stopped:
            print(f"  stopped {name} at {r['stage']} (not a verdict; not counted above): {r['reason']}", file=file)
            continue
        print(f"  rejected {name} at {r['stage']}: {r['reason']}", file=file)
    for name in summary["paused"]:
        wrong = summary.get("edit_errors", {}).get(name)
        print(f"  paused {name}: " + (f"{wrong}; fix it, then run again with --resume" if wrong else
                                      "edit its files, then run again with --resume"), file=file)
    for (stage, _), names in errors_alike(summary["errors"]).items():
        first = summary["errors"][names[0]]["reason"]
        more = f" — and {len(names) - 1} more theme(s) alike: {some_names(names[1:])}" if len(names) > 1 else ""
        print(f"  error {names[0]} at {stage} (not a verdict; not counted above): {first}{more}", file=file)
    for name, why in summary["skipped"].items():
        print(f"  skipped {name}: {why}", file=file)
    told: set[str] = set()
    for name, others in summary.get("same_dynamics", {}).items():
        if name not in told:
            told.update([name, *others])
            print(f"  same dynamics: {name} and {', '.join(others)} (one game under another skin or name)", file=file)
    for name, trivial in summary.get("trivial_levels", {}).items():
        print(f"  trivial levels: {name} has {len(trivial)} (" + "; ".join(
            f"{k}: {why}" for k, why in list(trivial.items())[:3]) + (", ..." if len(trivial) > 3 else "") + ")",
            file=file)
    for name, bands in summary.get("difficulty", {}).items():
        print(f"  difficulty: {name}: " + ", ".join(f"{n} {band}" for band, n in bands.items()), file=file)
    per = summary["cost_per_accepted_usd"]
    calls = summary["model_calls"]
    untrusted = [f"{calls['untrusted_usage']} call(s) with untrusted usage"] if calls.get("untrusted_usage") else []
    untrusted += [f"{calls['unusable_replies']} unusable repl(ies)"] if calls.get("unusable_replies") else []
    print(f"cost: ${summary['cost_usd']:.4f}" + (f" (${per:.4f} per accepted environment)" if per is not None else "")
          + (f"; {' and '.join(untrusted)}, each charged at least its reservation" if untrusted else ""), file=file)


def some_names(names: list[str], shown: int = 5) -> str:
    """The first `shown` names, and how many more: a run of a thousand themes prints a line, not a page."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def errors_alike(errors: dict[str, dict]) -> dict[tuple[str, str], list[str]]:
    """The themes' errors grouped by stage and reason, the theme's own words (quoted) and location
    left out: a thousand themes replay has no recording of are one group."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, r in errors.items():
        shape = re.sub(r"\(theme at [^)]*\)", "", re.sub(r"'[^']*'", "'…'", r["reason"]))
        groups.setdefault((r["stage"], shape), []).append(name)
    return groups
