"""Episode records on disk: one JSON line per episode (episodes.jsonl), the same as a CSV row
(episodes.csv), and one JSONL trajectory per episode (trajectories/...), written turn by turn.

An episode is identified by (env, level, run, agent, model). Re-running into the same folder
skips the episodes already recorded there, except those that ended for a reason outside the
agent (a failed model call, a budget cap): they run again and their new record wins.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from pipeline import records as files

EPISODES_JSONL = "episodes.jsonl"
EPISODES_CSV = "episodes.csv"
TRAJECTORIES = "trajectories"
KEY_FIELDS = ("env", "level", "run", "agent", "model")
NO_MODEL = "-"  # the model column of agents that call none


@dataclass
class EpisodeRecord:
    env: str
    level: str
    run: int
    agent: str
    model: str
    split: str
    stop_reason: str
    total_reward: float
    max_reward: float | None
    normalized: float | None  # total / max, clipped at 1; None when there is no usable max
    normalized_raw: float | None  # before clipping
    clipped: bool
    normalized_note: str  # why normalized is None, or that it was clipped
    steps: int  # agent turns, format errors included
    env_steps: int
    valid_actions: int
    invalid_actions: int
    format_errors: int
    action_validity_rate: float | None  # turns that produced an action / turns
    invalid_action_rate: float | None  # invalid actions / actions sent
    error_streaks: int
    recovered_streaks: int
    recovery_rate: float | None  # error streaks followed by a valid action / error streaks
    distinct_states: int
    model_calls: int
    retries: int
    tokens_in: int
    tokens_out: int
    dollars: float
    wall_seconds: float
    stop_detail: str = ""
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the step cap ended the episode (the runtime's, or the turns of --max-steps)
    trajectory: str = ""
    tags: dict = field(default_factory=dict)  # the environment's category tags (manifest.json)
    events: dict = field(default_factory=dict)  # event name -> times emitted
    executor_retries: list = field(default_factory=list)  # why earlier plays were lost (a Ray node died)

    @classmethod
    def scored(cls, *, total_reward: float, max_reward: float | None, **rest: Any) -> "EpisodeRecord":
        normalized, raw, clipped, note = normalize(total_reward, max_reward, rest.get("level", ""))
        return cls(total_reward=round(total_reward, 6), max_reward=max_reward, normalized=normalized,
                   normalized_raw=raw, clipped=clipped, normalized_note=note, **rest)

    @property
    def key(self) -> tuple:
        return tuple(getattr(self, k) for k in KEY_FIELDS)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "episode record") -> "EpisodeRecord":
        """From a record's fields; a field this envforge does not know, or a missing one, is refused
        (never dropped: it may be what determined the episode)."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise files.RecordError(f"{where}: expected the fields of {files.format_of('episode')}, found unknown "
                                    f"field(s) {', '.join(unknown)[:200]}; it was written by another envforge")
        missing = [n for n, f in known.items() if n not in data and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise files.RecordError(f"{where}: expected the fields of {files.format_of('episode')}, found no "
                                    f"{', '.join(missing)}")
        return cls(**data)


def normalize(total: float, max_reward: float | None, level: str = "") -> tuple[float | None, float | None, bool, str]:
    """(normalized, unclipped, clipped?, note). Normalized reward = total / the level's certified
    max reward, clipped at 1. With no max, or a max that is not positive, it is None (never a
    division by zero, never a made-up scale) and the note says why."""
    name = Path(level).name or "this level"
    if max_reward is None:
        return None, None, False, f"no max reward for {name} in level_max_rewards.json"
    if max_reward <= 0:
        return None, None, False, f"the max reward of {name} is {max_reward:g}, not positive"
    raw = round(total / max_reward, 6)
    if raw > 1:
        return 1.0, raw, True, f"clipped: total {total:g} is above the certified max {max_reward:g}"
    return raw, raw, False, ""


def csv_columns() -> list[str]:
    return [f.name for f in fields(EpisodeRecord)]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


class Records:
    """The records of an output folder; appends as episodes finish."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.jsonl = self.out / EPISODES_JSONL
        self.csv = self.out / EPISODES_CSV
        self.latest: dict[tuple, EpisodeRecord] = {}
        # A line cut short by a killed run is skipped (that episode runs again); a record of
        # another envforge is refused.
        for number, data in files.read_jsonl(self.jsonl, "episode"):
            record = EpisodeRecord.from_dict(data, f"{self.jsonl}:{number}")
            self.latest[record.key] = record

    def finished(self, key: tuple, rerun: Iterable[str]) -> bool:
        record = self.latest.get(key)
        return record is not None and record.stop_reason not in set(rerun)

    def trajectory_path(self, env: str, agent: str, model: str, level: str, run: int) -> Path:
        method = slug(agent if model == NO_MODEL else f"{agent}__{model}")
        return self.out / TRAJECTORIES / slug(env) / method / f"{slug(Path(level).stem)}__{Path(level).parent.name}__run{run}.jsonl"

    def add(self, record: EpisodeRecord) -> None:
        files.append_jsonl(self.jsonl, "episode", record.to_dict())
        row = io.StringIO(newline="")
        writer = csv.DictWriter(row, csv_columns(), extrasaction="ignore")
        if not self.csv.is_file():
            writer.writeheader()
        writer.writerow(_csv_row(record))
        files.append_text(self.csv, row.getvalue())
        self.latest[record.key] = record

    def all(self) -> list[EpisodeRecord]:
        return list(self.latest.values())

    def rewrite_csv(self) -> None:
        """One row per episode (the latest record of each), replacing rows a re-run superseded."""
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, csv_columns(), extrasaction="ignore")
        writer.writeheader()
        for record in self.all():
            writer.writerow(_csv_row(record))
        files.write_text(self.csv, text.getvalue())


def _csv_row(record: EpisodeRecord) -> dict:
    return {k: "" if v is None else json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
            for k, v in record.to_dict().items()}


class Trajectory(files.JsonlLog):
    """An episode's JSONL trajectory, written and flushed line by line so a crash loses nothing."""

    def __init__(self, path: Path):
        super().__init__(path, "trajectory")
