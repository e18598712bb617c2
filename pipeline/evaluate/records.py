"""Episode records on disk: one JSON line per episode (episodes.jsonl), the same as a CSV row
(episodes.csv), and one JSONL trajectory per episode (trajectories/...), written turn by turn.

An episode is identified by (env, level, run, agent, model), and its record carries what
determined it (PROVENANCE): the environment's content hash, the level's hash and certified max
reward, the split, and the settings (episode limits, agent options). Resuming into the same
folder reuses a record only when all of these match and it did not end for a reason outside the
agent (a failed model call, a budget cap); any other episode runs again and its new record wins.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from pipeline import layout
from pipeline import records as files

EPISODES_JSONL = "episodes.jsonl"
EPISODES_CSV = "episodes.csv"
TRAJECTORIES = "trajectories"
KEY_FIELDS = ("env", "level", "run", "agent", "model")
# What determined an episode besides its key; a record is reused only when all of it matches.
PROVENANCE = {"env_hash": "the environment changed", "level_hash": "the level changed",
              "max_reward": "the level's max reward changed", "split": "the split changed",
              "settings": "the settings changed"}
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
    env_hash: str = ""  # content_hash() of the environment folder
    level_hash: str = ""  # sha256 of the level file
    settings: dict = field(default_factory=dict)  # episode limits and agent options (RunOptions.settings())
    confinement: str = ""  # the sandbox rung of the episode's worker (pipeline/sandbox/capabilities.py)

    @classmethod
    def scored(cls, *, total_reward: float, max_reward: float | None, unscored: str = "", max_note: str = "",
               **rest: Any) -> "EpisodeRecord":
        """The record with its normalized reward; `unscored`: why the episode has none whatever
        its total (its environment's rewards were not finite); `max_note`: what its max reward's
        standing adds (EnvSpec.scoring_max)."""
        if unscored:
            normalized, raw, clipped, note = None, None, False, unscored
        else:
            normalized, raw, clipped, note = normalize(total_reward, max_reward, rest.get("level", ""), max_note)
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


def normalize(total: float, max_reward: float | None, level: str = "",
              max_note: str = "") -> tuple[float | None, float | None, bool, str]:
    """(normalized, unclipped, clipped?, note). Normalized reward = total / the level's certified
    max reward, clipped at 1. With no max, a max that is not positive, or one that must not
    divide (unknown, a claim found wrong: `max_note` says why), it is None (never a division by
    zero, never a made-up scale) and the note says why. A max that divides but is not certified
    (a lower bound, an unchecked claim) gives a score whose note says so."""
    name = Path(level).name or "this level"
    if max_reward is None:
        return None, None, False, max_note or f"no max reward for {name} in level_max_rewards.json"
    if max_reward <= 0:
        return None, None, False, f"the max reward of {name} is {max_reward:g}, not positive: left out of normalized scores"
    raw = round(total / max_reward, 6)
    if not math.isfinite(raw):  # a total near the largest float over a max near zero
        return None, None, False, f"total {total:g} / max reward {max_reward:g} of {name} is not a finite number"
    if raw > 1:
        return 1.0, raw, True, "; ".join(filter(None, [f"clipped: total {total:g} is above the "
                                                       f"{'' if max_note else 'certified '}max {max_reward:g}", max_note]))
    return raw, raw, False, max_note


def content_hash(env_dir: Path) -> str:
    """What determines an environment's episodes apart from its levels: the sha256 of every file
    of the folder except its level folders and envforge's records."""
    digest = hashlib.sha256()
    for rel, sha in layout.EnvDir.at(env_dir).file_hashes().items():
        if Path(rel).parts[0] in layout.LEVEL_SPLITS.values() or rel in layout.RECORD_KINDS:
            continue
        digest.update(f"{rel}\0{sha}\n".encode())
    return digest.hexdigest()


def level_hash(env_dir: Path, level: str) -> str:
    """The sha256 of the level file; of the id for a level made from a seed ("seed:N", which the
    environment's generator, part of its content hash, turns into the same level every time)."""
    path = env_dir / level
    return hashlib.sha256(path.read_bytes() if path.is_file() else f"id:{level}".encode()).hexdigest()


def csv_columns() -> list[str]:
    return [f.name for f in fields(EpisodeRecord)]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


class Records:
    """The records of an output folder; appends as episodes finish."""

    def __init__(self, out: str | Path, repair: bool = False):
        """`repair`: this process appends next (evaluate): a last line cut short by a killed run is
        set aside first (episodes.jsonl.torn, with a warning) and that episode runs again; without
        it such a line is skipped with a warning. A record of another envforge is refused."""
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.jsonl = self.out / EPISODES_JSONL
        self.csv = self.out / EPISODES_CSV
        self.latest: dict[tuple, EpisodeRecord] = {}
        for number, data in files.read_jsonl(self.jsonl, "episode", repair=repair):
            record = EpisodeRecord.from_dict(data, f"{self.jsonl}:{number}")
            self.latest[record.key] = record

    def reuse(self, key: tuple, determined_by: dict, rerun: Iterable[str]) -> tuple[bool, str]:
        """(reuse the record of `key`?, why not when there is one): reused only when every field of
        `determined_by` (PROVENANCE) matches and it did not stop for a reason in `rerun`."""
        record = self.latest.get(key)
        if record is None or record.stop_reason in set(rerun):
            return False, ""
        changed = [why for name, why in PROVENANCE.items() if getattr(record, name) != determined_by[name]]
        return not changed, changed[0] if changed else ""

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
