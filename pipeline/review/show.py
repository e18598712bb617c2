"""`envforge review` and `review show` as text: the table of environments, and one environment
explained — why it stopped, what the coding agent changed and what each check found."""
from __future__ import annotations

import shutil
import sys
import time

from envforge.pipeline import difficulty
from envforge.pipeline.kinds import UnknownCause
from envforge.pipeline.review.advice import advise
from envforge.pipeline.review.catalog import Entry, count_labels, shorten
from envforge.pipeline.review.details import Details

COLUMNS = ("name", "theme", "status", "stage", "reason", "repair", "cost")


def table(entries: list[Entry], theme_width: int = 32, reason_width: int | None = None) -> str:
    """On a terminal the reason column takes the width left (at least 40 characters); piped
    output keeps whole reasons, for grep."""
    if reason_width is None and sys.stdout.isatty():
        used = max([len(e.name) for e in entries] + [4]) + theme_width + 18 + 11 + 6 + 8 + 12
        reason_width = max(40, shutil.get_terminal_size().columns - used)
    rows = [COLUMNS] + [(e.name, shorten(e.theme, theme_width), e.label, e.stage or "-",
                         (shorten(e.reason, reason_width) if reason_width else e.reason) or "-",
                         "-" if e.repair_steps is None else str(e.repair_steps), f"${e.cost_usd:.4f}") for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def counts(entries: list[Entry]) -> str:
    return ", ".join(f"{n} {label}" for label, n in count_labels(entries).items()) or "no environments"


def explain(d: Details, full: bool = False) -> str:
    e = d.entry
    out: list[str] = []
    add = out.append
    verdict = e.label + (f" at {e.stage}" if e.status == "rejected" and e.stage else "")
    add(f"{e.name}: {verdict}")
    add(f"theme:  {e.theme}" + (f"  ({e.source})" if e.source else ""))
    add(f"folder: {e.folder or '(missing)'}")
    add(f"reason: {e.reason or '-'}")
    advice = advise(d)
    if advice:
        add(f"means:  {advice.meaning}")
        add(f"next:   {advice.next}")
    if e.human:
        add(f"human review: {e.human.decision} by hand at {e.human.at}: {e.human.reason}"
            + ("" if e.by_hand else " (as the pipeline decided)"))
        if d.rejection and e.status == "accepted":
            add(f"  (the pipeline rejected it at {d.rejection.stage}: {d.rejection.reason})")

    if d.problems or d.traceback:
        _section(out, "failing check")
        out += [f"  error: {p}" for p in d.problems]
        if d.traceback:
            out += ["  " + ln for ln in d.traceback.rstrip().splitlines()]

    verification = d.verification or d.verification_failure
    if verification:
        _section(out, "verification")
        add(f"  {'accepted' if verification.get('accepted') else 'rejected at ' + str(verification.get('stage'))}: "
            f"{verification.get('reason', '')}")
        cause = d.cause
        if isinstance(cause, UnknownCause):
            add(f"  cause: {shorten(cause.kind, 60)} (a kind this envforge does not know)")
        elif cause is not None:
            add(f"  cause: {cause.TAG_VALUE}")
        out += [f"  {stage}: " + ", ".join(f"{k} {v}" for k, v in shown.items())
                for stage, shown in d.shown_figures.items()]

    if d.difficulty:
        scores = [p.score for p in d.difficulty.values()]
        _section(out, f"difficulty (scores {min(scores)}..{max(scores)}: "
                      + ", ".join(f"{n} {band}" for band, n in difficulty.histogram(scores).items()) + ")")
        out += [f"  {level}: {difficulty.line(p)}" for level, p in d.difficulty.items()]

    _section(out, "coding agent")
    if not d.agent:
        add("  (no code or repair steps recorded)")
    for attempt in d.agent:
        add(f"  {attempt.stage}, attempt {attempt.number}: {len(attempt.steps)} step(s); changed "
            f"{', '.join(attempt.changed) or 'nothing'}")
        for step in attempt.steps:
            said = shorten(step.text, 100)
            add(f"    step {step.number}:" + (f" \"{said}\"" if said else ""))
            for tool in step.tools:
                add(f"      - {tool.summary() if full else shorten(tool.summary(), 140)}")

    if d.edits:
        _section(out, "edited by hand (since the model wrote them)")
        for _name, diff in d.edits.items():
            lines = diff.rstrip().splitlines()
            if not full and len(lines) > 40:
                lines = lines[:40] + [f"... ({len(diff.splitlines()) - 40} more lines; --full shows all)"]
            out += ["  " + ln for ln in lines]

    _section(out, "stage attempts (oldest first)")
    if not d.attempts:
        add("  (none: the theme never reached a stage)")
    for a in d.attempts:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(a["started"])) if a["started"] else "?"
        add(
            (
                f"  {when}  {a['stage']:<8} {a['status']:<20}" + (f" {shorten(a['error'], 110)}" if a["error"] else "")
            ).rstrip()
        )

    _section(out, "cost by stage")
    add(f"  {'stage':<12} {'attempts':>8}  {'latest':<11} {'steps':>5} {'tokens in':>10} {'tokens out':>10} "
        f"{'seconds':>8} {'usd':>10}")
    for c in d.costs:
        add(f"  {c.stage:<12} {c.attempts:>8}  {c.status:<11} {'-' if c.steps is None else c.steps:>5} "
            f"{c.input_tokens:>10} {c.output_tokens:>10} {c.seconds:>8.2f} {c.usd:>10.4f}")
    add(f"  {'total':<12} {sum(c.attempts for c in d.costs):>8}  {'':<11} {'':>5} "
        f"{sum(c.input_tokens for c in d.costs):>10} {sum(c.output_tokens for c in d.costs):>10} "
        f"{sum(c.seconds for c in d.costs):>8.2f} {sum(c.usd for c in d.costs):>10.4f}")

    for name in ("design.md", "config.yaml"):
        if name in d.files:
            _section(out, name)
            text = d.files[name].rstrip()
            lines = text.splitlines()
            if not full and len(lines) > 60:
                lines = lines[:60] + [f"... ({len(text.splitlines()) - 60} more lines; --full shows all)"]
            out += ["  " + ln for ln in lines]
    return "\n".join(out) + "\n"


def _section(out: list[str], title: str) -> None:
    out += ["", f"== {title} =="]
