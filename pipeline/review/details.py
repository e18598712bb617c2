"""Everything known about one environment, gathered once for `review show` and the HTML report:
its files, why it failed, what the coding agent did, verification figures, cost by stage."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envforge.pipeline import layout, manifest, safe_io
from envforge.pipeline.kinds import (
    DifficultyProfile,
    LevelMaxRewards,
    Manifest,
    RecordError,
    Rejection,
    RejectionCause,
    ThemeRecord,
    Verification,
    VerifyFigures,
)
from envforge.pipeline.review import history
from envforge.pipeline.review.catalog import Entry, read_record
from envforge.pipeline.review.edits import hand_edits

# The files a reviewer reads, in reading order (what the agent is told comes after the code).
SHOWN_FILES = (layout.DESIGN, layout.CONFIG, *layout.CODE_FILES, layout.AGENT_INSTRUCTION, layout.ACTION_SPACE)


@dataclass
class StageCost:
    stage: str
    attempts: int = 0
    status: str = ""  # of the latest attempt
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0
    steps: int | None = None  # of the latest attempt


@dataclass
class Details:
    entry: Entry
    theme: ThemeRecord
    files: dict[str, str]  # name -> text, for the SHOWN_FILES that exist
    rejection: Rejection | None  # rejection.json, None when there is none
    verification: dict  # verification.json, {} when verify never ran
    manifest: Manifest
    agent: list[history.AgentAttempt]
    costs: list[StageCost]
    attempts: list[dict] = field(default_factory=list)  # every stage attempt, oldest first
    edits: dict[str, str] = field(default_factory=dict)  # file -> diff from the model's version
    difficulty: dict[str, DifficultyProfile] = field(default_factory=dict)  # level -> its profile (verify wrote)

    @property
    def problems(self) -> list[str]:
        """The failing check: the located problems behind the rejection."""
        details = self.rejection.details if self.rejection else {}
        return [str(p) for p in details.get("problems") or []]

    @property
    def traceback(self) -> str:
        return str((self.rejection.details if self.rejection else {}).get("traceback") or "")

    @property
    def verification_failure(self) -> dict:
        """The verification output behind a rejection at execution, levels or reliability."""
        return (self.rejection.details if self.rejection else {}).get("verification") or {}

    @property
    def figures(self) -> VerifyFigures:
        """Verification figures per stage (execution, levels, reliability, total), as verify's model
        (figures that do not read as verify's show as none)."""
        try:
            return VerifyFigures.from_dict((self.verification or self.verification_failure).get("stages") or {},
                                           "verification figures")
        except RecordError:
            return VerifyFigures()

    @property
    def cause(self) -> RejectionCause | None:
        """Why verification rejected it, as verify's typed cause (None: no cause recorded, e.g. by an
        older envforge, or not a JSON object with a kind; a kind this envforge does not know reads as
        an UnknownCause)."""
        found = (self.verification or self.verification_failure).get("cause")
        try:
            return RejectionCause.from_dict(found, "verification cause") if found is not None else None
        except RecordError:
            return None

    @property
    def shown_figures(self) -> dict[str, dict]:
        """Each stage's figures a reader is shown: its numbers and words (and its failures by kind),
        not its tables."""
        return {stage: {k: v for k, v in f.items() if not isinstance(v, (dict, list)) or k == "failures_by_kind"}
                for stage, f in self.figures.to_dict().items() if isinstance(f, dict)}

    def to_dict(self) -> dict:
        return {"entry": self.entry.to_dict(), "theme": self.theme.to_dict(), "files": self.files,
                "rejection": self.rejection.to_dict() if self.rejection else {},
                "problems": self.problems, "verification": self.verification or self.verification_failure,
                "human_review": self.entry.human.to_dict() if self.entry.human else None,
                "agent": [{"stage": a.stage, "attempt": a.number, "steps": len(a.steps), "changed": a.changed,
                           "checks": a.checks,
                           "actions": [{"step": s.number, "text": s.text, "tools": [t.summary() for t in s.tools]}
                                       for s in a.steps]} for a in self.agent],
                "edited_by_hand": self.edits, "costs": [vars(c) for c in self.costs], "attempts": self.attempts}


def gather(entry: Entry) -> Details:
    folder = Path(entry.folder) if entry.folder else None
    files = {}
    for name in SHOWN_FILES:
        text = safe_io.read_shown(folder, name) if folder else None
        if text is not None:
            files[name] = text
    agent = history.agent_attempts(folder / layout.TRAJECTORY) if folder else []
    theme = read_record(folder / layout.THEME_FILE, ThemeRecord) if folder else None
    return Details(entry, theme or ThemeRecord(entry.name, entry.theme, where=entry.source), files,
                   read_record(folder / layout.REJECTION, Rejection) if folder else None,
                   _verification(folder),
                   manifest.read(folder) if folder else Manifest(name=entry.name), agent,
                   stage_costs(entry.attempts), entry.attempts, hand_edits(folder, agent) if folder else {},
                   difficulty_profiles(folder))


def difficulty_profiles(folder: Path | None) -> dict[str, DifficultyProfile]:
    """level -> the difficulty profile verify wrote beside its max in level_max_rewards.json; {} when none."""
    maxima = read_record(folder / layout.LEVEL_MAX_REWARDS, LevelMaxRewards) if folder else None
    return {k: e.difficulty for k, e in (maxima.levels if maxima else {}).items() if e.difficulty is not None}


def _verification(folder: Path | None) -> dict:
    """verification.json read as its model (one that does not fit reads as none), as the dict the
    report's figures are shown from."""
    verification = read_record(folder / layout.VERIFICATION, Verification) if folder else None
    return verification.to_dict() if verification else {}


def stage_costs(attempts: list[dict]) -> list[StageCost]:
    costs: dict[str, StageCost] = {}
    for a in attempts:
        c = costs.setdefault(a["stage"], StageCost(a["stage"]))
        c.attempts += 1
        c.status, c.steps = a["status"] or "", a["steps"]
        c.input_tokens += a["input_tokens"] or 0
        c.output_tokens += a["output_tokens"] or 0
        c.usd = round(c.usd + (a["usd"] or 0.0), 6)
        c.seconds = round(c.seconds + max(0.0, (a["ended"] or a["started"]) - a["started"]), 2)
    return list(costs.values())

