"""The environments of one `envforge generate` output folder, as a person reviewing it sees them.

The run database says what happened to each theme (status, stage, reason, attempts, costs);
the folders say where it is now and hold the human decision (manifest.json `human_review`).
An entry joins the two. Reading never changes either.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, TypeVar

from envforge.pipeline import layout, manifest, safe_io
from envforge.pipeline import records as files
from envforge.pipeline.errors import LocatedError, UserError, not_a_folder
from envforge.pipeline.generate import stages
from envforge.pipeline.generate.rundb import RunDB
from envforge.pipeline.kinds import BudgetCapReached, HumanReview, ModelCall, Record, RecordError, RejectionCause
from envforge.pipeline.review import history

R = TypeVar("R", bound=Record)

# Where a theme's folder is: the three places of layout.OutputDir.
ACCEPTED, REJECTED, WORK = "accepted", "rejected", "work"
STATUS_FILTERS = ("accepted", "rejected", "paused", "running", "by-hand")
SORT_KEYS = ("name", "status", "stage", "cost", "steps", "theme")
# Sorting by stage follows the pipeline ("review": rejected by hand after passing them all).
STAGE_ORDER = stages.catalogue_order()


@dataclass
class Entry:
    name: str
    theme: str
    source: str  # where the theme came from: "themes.txt:3"
    status: str  # accepted | rejected | paused | running
    stage: str  # the stage the pipeline reached (where it stopped, or "package" when it passed all)
    reason: str
    folder: str  # "" when the folder is gone
    place: str  # accepted | rejected | work | ""
    human: HumanReview | None = None  # manifest.json human_review
    repair_steps: int | None = None  # steps (tool calls) of the latest repair attempt; None if repair never ran
    cost_usd: float = 0.0  # every attempt of every stage, superseded ones too: money spent is spent
    retried_by_hand: bool = False  # a person ran `review retry` on it: its verdict is not the pipeline's alone
    attempts: list[dict] = field(default_factory=list, repr=False)
    cause: RejectionCause | None = None  # why it was rejected, for code (see `rejection_cause`)
    run: str = field(default="", repr=False)  # the output folder it belongs to (what `--out` names)
    run_args: dict = field(default_factory=dict, repr=False)  # the arguments of the run that last worked on it

    @property
    def by_hand(self) -> bool:
        """A person decided otherwise than the pipeline (a decision written before the pipeline's
        verdict was kept beside it is taken as an override)."""
        return self.human is not None and self.human.decision != self.human.pipeline

    @property
    def label(self) -> str:
        """The status as every view shows it: "accepted (by hand)" for a human override."""
        return f"{self.status} (by hand)" if self.by_hand and self.status in ("accepted", "rejected") else self.status

    @property
    def machine_status(self) -> str:
        """What the pipeline itself decided (a human override reverses it)."""
        if self.human and self.human.pipeline in ("accepted", "rejected"):
            return self.human.pipeline
        if self.by_hand and self.status in ("accepted", "rejected"):
            return "rejected" if self.status == "accepted" else "accepted"
        return self.status

    @property
    def path(self) -> Path:
        return Path(self.folder)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("attempts")
        data.pop("run")  # the folder the listing is of
        data.pop("run_args")
        data["human"] = self.human.to_dict() if self.human else None
        data["cause"] = self.cause.to_dict() if self.cause else None
        data.update(label=self.label, by_hand=self.by_hand, machine_status=self.machine_status)
        return data


class Catalog:
    """An opened output folder: its run database and its environment folders."""

    def __init__(self, out: layout.OutputDir, db: RunDB):
        self.out, self.db = out, db

    @classmethod
    def open(cls, root: str | Path) -> "Catalog":
        out = layout.OutputDir(Path(root).resolve())
        if not out.root.is_dir():
            raise UserError(f"--out {root}: expected the output folder of `envforge generate`, found "
                            + not_a_folder(out.root))
        if not out.db.is_file():
            raise UserError(f"--out {root}: expected a run database ({layout.RUN_DB}) written by `envforge generate`, "
                            f"found none; pass the folder you gave `envforge generate --out`")
        return cls(out, RunDB(out.db))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> list[str]:
        return [row["name"] for row in self.db.themes()]

    def entries(self) -> list[Entry]:
        attempts: dict[str, list[dict]] = {}
        for a in self.db.attempts():
            attempts.setdefault(a["theme"], []).append(a)
        return [self._entry(row, attempts.get(row["name"], [])) for row in self.db.themes()]

    def get(self, name: str) -> Entry:
        row = self.db.theme(name)
        if row is None:
            known = self.names()
            raise UserError(f"no environment named {name!r} in {self.out.root}; expected one of: "
                            + (", ".join(known) if known else "(none: the run database lists no themes)"))
        return self._entry(row, self.db.attempts(name))

    def locate(self, name: str) -> tuple[str, Path | None]:
        for place, path in ((WORK, self.out.work(name)), (ACCEPTED, self.out.accepted(name)),
                            (REJECTED, self.out.rejected(name))):
            if path.is_dir():
                return place, path
        return "", None

    def _entry(self, row: dict, attempts: list[dict]) -> Entry:
        place, path = self.locate(row["name"])
        human = None
        if path is not None:
            human = manifest.read(path).human_review
            if not any(a["stage"] == "review" for a in attempts):
                human = None  # a decision `envforge review` never made (a model wrote the manifest)
        return Entry(name=row["name"], theme=row["theme"] or "", source=row["source"] or "", status=row["status"] or "",
                     stage=row["stage"] or "", reason=row["reason"] or "", folder=str(path) if path else "",
                     place=place, human=human, repair_steps=_repair_steps(path, attempts),
                     cost_usd=round(sum(a["usd"] or 0.0 for a in attempts), 6), attempts=attempts,
                     retried_by_hand="review retry" in self.db.commands(row["name"]),
                     cause=rejection_cause(row, attempts), run=str(self.out.root),
                     run_args=self.db.run_args(row["name"]))


def rejection_cause(row: dict, attempts: list[dict]) -> RejectionCause | None:
    """Why a rejected theme was rejected, as the run database records it beside the reason. A row
    written before causes has none; what its reason's words say is not taken (they quote model and
    environment text), but a budget stop is known all the same: the attempt that rejected it (the
    theme's latest) ended with a budget exit status, a name envforge wrote, not words."""
    if row["status"] != "rejected":
        return None
    if row.get("cause") is not None:
        return row["cause"]
    last = attempts[-1] if attempts else {}
    if last.get("status") == "rejected" and last.get("exit_status") in (stages.THEME_BUDGET, stages.RUN_BUDGET):
        return BudgetCapReached("run" if last["exit_status"] == stages.RUN_BUDGET else "theme")
    return None


def select(entries: list[Entry], status: str | None = None, stage: str | None = None, reason: str | None = None,
           sort: str = "name", reverse: bool = False) -> list[Entry]:
    """Filter (status, exact stage, reason text case-insensitively) and sort the entries."""
    if status == "by-hand":
        entries = [e for e in entries if e.by_hand]
    elif status:
        entries = [e for e in entries if e.status == status]
    if stage:
        entries = [e for e in entries if e.stage == stage]
    if reason:
        entries = [e for e in entries if reason.lower() in e.reason.lower()]
    key = {
        "name": lambda e: e.name,
        "status": lambda e: (e.label, e.name),
        "stage": lambda e: (_stage_order(e.stage), e.name),
        "cost": lambda e: (e.cost_usd, e.name),
        "steps": lambda e: (e.repair_steps if e.repair_steps is not None else -1, e.name),
        "theme": lambda e: (e.theme.lower(), e.name),
    }[sort]
    return sorted(entries, key=key, reverse=reverse)


def count_labels(entries: list[Entry]) -> dict[str, int]:
    """How many entries show each status label ("accepted", "rejected (by hand)", ...)."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.label] = counts.get(e.label, 0) + 1
    return dict(sorted(counts.items()))


def _stage_order(stage: str) -> int:
    return STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER)


def _repair_steps(path: Path | None, attempts: list[dict]) -> int | None:
    repairs = [a for a in attempts if a["stage"] == "repair" and a["status"] != "running"]
    if not repairs:
        return None
    if repairs[-1]["steps"] is not None:
        return repairs[-1]["steps"]
    # A rejected repair stage records no steps in the database; its trajectory has them.
    runs = [a for a in history.agent_attempts(path / layout.TRAJECTORY) if a.stage == "repair"] if path else []
    return sum(max(1, len(step.tools)) for step in runs[-1].steps) if runs else None  # as agent.py counts


def read_record(path: Path, model: type[R]) -> R | None:
    """A record of a theme's folder as its model, bounded and never through a link; None when it
    is absent or unfit (the report shows what it can). A record a newer envforge wrote is refused."""
    data = read_json(path)  # refuses a newer major
    if not data:
        return None
    try:
        return model.from_dict(data, str(path))
    except RecordError:  # its body does not fit the model
        return None


def model_calls(folder: Path) -> Iterator[ModelCall]:
    """The call journal of a theme's folder, oldest first; a line that does not fit is left out
    (the report shows what it can), one a newer envforge wrote is refused."""
    for _, call in files.lines(folder / layout.CALL_JOURNAL, ModelCall, unfit="skip"):
        yield call


def read_json(path: Path) -> dict:
    """A JSON object from a theme's folder, bounded and never through a link; {} when it is
    absent or unfit (the report shows what it can). A record a newer envforge wrote is refused."""
    try:
        data = safe_io.load_json(path.parent, path.name) if safe_io.exists(path.parent, path.name) else {}
    except LocatedError:
        return {}
    if not isinstance(data, dict):
        return {}
    kind = layout.RECORD_KINDS.get(path.name)
    return files.check(data, kind, path) if kind else data


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"
