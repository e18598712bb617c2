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
import re
from dataclasses import fields
from pathlib import Path
from typing import Iterable

from envforge.pipeline import layout
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.kinds import NO_MODEL, EpisodeRecord, TrajectoryLine

EPISODES_JSONL = "episodes.jsonl"
EPISODES_CSV = "episodes.csv"
TRAJECTORIES = "trajectories"
# What determined an episode besides its key; a record is reused only when all of it matches.
PROVENANCE = {"env_hash": "the environment changed", "level_hash": "the level changed",
              "max_reward": "the level's max reward changed", "split": "the split changed",
              "settings": "the settings changed"}


def content_hash(env_dir: Path) -> str:
    """What determines an environment's episodes apart from its levels: the sha256 of every file
    of the folder except its level folders and envforge's records."""
    digest = hashlib.sha256()
    for rel, sha in layout.EnvDir.at(env_dir).file_hashes().items():
        if Path(rel).parts[0] in layout.LEVEL_SPLITS.values() or rel in layout.RECORD_KINDS:
            continue
        digest.update(f"{rel}\0{sha}\n".encode())
    return digest.hexdigest()


def level_hash(env_dir: Path, level: Level) -> str:
    """The sha256 of the level file; of the id for a level made from a seed ("seed:N", which the
    environment's generator, part of its content hash, turns into the same level every time)."""
    path = env_dir / str(level)
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
        for _, record in files.lines(self.jsonl, EpisodeRecord, repair=repair):
            self.latest[record.key] = record

    def reuse(self, key: tuple, determined_by: dict, rerun: Iterable[str]) -> tuple[bool, str]:
        """(reuse the record of `key`?, why not when there is one): reused only when every field of
        `determined_by` (PROVENANCE) matches and it did not stop for a reason in `rerun`."""
        record = self.latest.get(key)
        if record is None or record.stop_reason in set(rerun):
            return False, ""
        changed = [why for name, why in PROVENANCE.items() if getattr(record, name) != determined_by[name]]
        return not changed, changed[0] if changed else ""

    def trajectory_path(self, env: str, agent: str, model: str, level: Level, run: int) -> Path:
        method = slug(agent if model == NO_MODEL else f"{agent}__{model}")
        return (
            self.out
            / TRAJECTORIES
            / slug(env)
            / method
            / f"{slug(Path(str(level)).stem)}__{Path(str(level)).parent.name}__run{run}.jsonl"
        )

    def add(self, record: EpisodeRecord) -> None:
        files.append(self.jsonl, record)
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
        super().__init__(path, TrajectoryLine.KIND)
