"""The run database (SQLite, in the output folder): runs, themes, stage attempts.

It is the record of what happened, read by `--resume`, `envforge review` and the summary.
Only the event-loop thread writes to it. The files an accepted environment holds, with their
sha256, are listed in its manifest.json, not here.

Schema versions (PRAGMA user_version, pipeline/records.py SQLITE_SCHEMAS["run_db"]):
  1  runs, themes, stage_attempts, and an `artifacts` table nothing wrote;
  2  the `artifacts` table is dropped (a version-1 database is upgraded when opened);
  3  themes.cause: why a rejected theme was rejected, as a typed cause (pipeline.kinds.RejectionCause,
     its JSON), written with the status it explains by `set_theme` and cleared by every other status.
     An envforge reading version 2 would update a theme's status and leave its cause stale, so it
     refuses version 3; a version-2 database is upgraded when opened (its rejections have no cause).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from envforge.pipeline import records as files
from envforge.pipeline.kinds import RecordError, RejectionCause

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, started REAL, finished REAL, status TEXT, args TEXT, summary TEXT);
CREATE TABLE IF NOT EXISTS themes (
    name TEXT PRIMARY KEY, theme TEXT, source TEXT, status TEXT, stage TEXT, reason TEXT,
    run_id INTEGER, updated REAL, cause TEXT);
CREATE TABLE IF NOT EXISTS stage_attempts (
    id INTEGER PRIMARY KEY, run_id INTEGER, theme TEXT, stage TEXT, started REAL, ended REAL,
    status TEXT, error TEXT, input_tokens INTEGER, output_tokens INTEGER, usd REAL, steps INTEGER,
    exit_status TEXT);
"""

THEME_COLUMNS = ("name", "theme", "source", "status", "stage", "reason", "cause")


class RunDB:
    def __init__(self, path: Path):
        self.path = path
        self.conn = files.Guarded(files.open_sqlite(path, SCHEMA, "run_db", isolation_level=None, timeout=30), path)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("DROP TABLE IF EXISTS artifacts")  # a version-1 database: the table nothing wrote
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(stage_attempts)")}
        if "exit_status" not in columns:  # a database written before stages named how they ended
            self.conn.execute("ALTER TABLE stage_attempts ADD COLUMN exit_status TEXT")
        theme_columns = {row[1] for row in self.conn.execute("PRAGMA table_info(themes)")}
        if "determined_by" not in theme_columns:
            self.conn.execute("ALTER TABLE themes ADD COLUMN determined_by TEXT")  # a database of an earlier envforge
        if "cause" not in theme_columns:  # a database written before rejections named their cause
            self.conn.execute("ALTER TABLE themes ADD COLUMN cause TEXT")

    def close(self) -> None:
        self.conn.close()

    # -- runs --------------------------------------------------------------------------
    def start_run(self, args: dict) -> int:
        cur = self.conn.execute("INSERT INTO runs (started, status, args) VALUES (?, 'running', ?)",
                                (time.time(), json.dumps(args, default=str)))
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str, summary: dict) -> None:
        self.conn.execute("UPDATE runs SET finished=?, status=?, summary=? WHERE id=?",
                          (time.time(), status, json.dumps(summary), run_id))

    # -- themes ------------------------------------------------------------------------
    def set_theme(self, run_id: int, name: str, theme: str, source: str, status: str,
                  stage: str = "", reason: str = "", cause: RejectionCause | None = None) -> None:
        """The theme's status; `cause`: why it was rejected, for code (a status without one clears it)."""
        written = json.dumps(cause.to_dict()) if cause is not None else None
        self.conn.execute(
            "INSERT INTO themes (name, theme, source, status, stage, reason, run_id, updated, cause) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET theme=excluded.theme, "
            "source=excluded.source, status=excluded.status, stage=excluded.stage, reason=excluded.reason, "
            "run_id=excluded.run_id, updated=excluded.updated, cause=excluded.cause",
            (name, theme, source, status, stage, reason, run_id, time.time(), written))

    def theme(self, name: str) -> dict | None:
        """The theme's row ("cause" read back as its RejectionCause, None when none was recorded)."""
        row = self.conn.execute(f"SELECT {', '.join(THEME_COLUMNS)} FROM themes WHERE name=?", (name,)).fetchone()
        return _theme_row(row) if row else None

    def set_determined_by(self, name: str, determined_by: dict) -> None:
        """What a theme's stages are about to be run with (generate.run.determined_by)."""
        self.conn.execute("INSERT INTO themes (name, determined_by) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                          "determined_by=excluded.determined_by", (name, json.dumps(determined_by, sort_keys=True)))

    def determined_by(self, name: str) -> dict | None:
        """What the theme's recorded stages were run with; None when it has no row, {} when an
        earlier envforge did not record it."""
        row = self.conn.execute("SELECT determined_by FROM themes WHERE name=?", (name,)).fetchone()
        if row is None:
            return None
        try:
            stored = json.loads(row[0] or "{}")
        except ValueError:
            stored = {}
        return stored if isinstance(stored, dict) else {}

    def run_args(self, theme: str) -> dict:
        """The arguments of the run that last worked on `theme` ({} when unknown): a retry reuses
        its level count and seed."""
        row = self.conn.execute("SELECT runs.args FROM themes JOIN runs ON runs.id = themes.run_id WHERE themes.name=?",
                                (theme,)).fetchone()
        return json.loads(row[0]) if row and row[0] else {}

    def commands(self, theme: str) -> list[str]:
        """The commands of the runs that worked on `theme`, in order ("generate", "review retry", ...)."""
        rows = self.conn.execute("SELECT DISTINCT runs.id, runs.args FROM runs JOIN stage_attempts ON "
                                 "stage_attempts.run_id = runs.id WHERE stage_attempts.theme=? ORDER BY runs.id",
                                 (theme,))
        out = []
        for _, args in rows:
            try:
                out.append(str(json.loads(args or "{}").get("command") or "generate"))
            except (ValueError, AttributeError):
                out.append("generate")
        return out

    def themes(self) -> list[dict]:
        rows = self.conn.execute(f"SELECT {', '.join(THEME_COLUMNS)} FROM themes ORDER BY name")
        return [_theme_row(r) for r in rows]

    # -- stage attempts ----------------------------------------------------------------
    def start_stage(self, run_id: int, theme: str, stage: str) -> int:
        cur = self.conn.execute("INSERT INTO stage_attempts (run_id, theme, stage, started, status) "
                                "VALUES (?, ?, ?, ?, 'running')", (run_id, theme, stage, time.time()))
        return int(cur.lastrowid)

    def end_stage(self, attempt: int, status: str, error: str = "", input_tokens: int = 0,
                  output_tokens: int = 0, usd: float = 0.0, steps: int | None = None,
                  exit_status: str = "") -> None:
        self.conn.execute("UPDATE stage_attempts SET ended=?, status=?, error=?, input_tokens=?, output_tokens=?, "
                          "usd=?, steps=?, exit_status=? WHERE id=?",
                          (time.time(), status, error, input_tokens, output_tokens, usd, steps, exit_status, attempt))

    def stage_done(self, theme: str, stage: str) -> bool:
        row = self.conn.execute("SELECT status FROM stage_attempts WHERE theme=? AND stage=? ORDER BY id DESC LIMIT 1",
                                (theme, stage)).fetchone()
        return bool(row) and row[0] == "done"

    def forget_stages(self, theme: str, stages: tuple[str, ...]) -> None:
        """Mark stages to run again (a retry from a stage); their history is kept."""
        self.conn.executemany(
            "UPDATE stage_attempts SET status='superseded' WHERE theme=? AND stage=? AND status='done'",
            [(theme, s) for s in stages],
        )

    def attempts(self, theme: str | None = None) -> list[dict]:
        sql = ("SELECT theme, stage, started, ended, status, error, input_tokens, output_tokens, usd, steps, "
               "exit_status FROM stage_attempts" + (" WHERE theme=?" if theme else "") + " ORDER BY id")
        keys = (
            "theme",
            "stage",
            "started",
            "ended",
            "status",
            "error",
            "input_tokens",
            "output_tokens",
            "usd",
            "steps",
            "exit_status",
        )
        return [dict(zip(keys, r)) for r in self.conn.execute(sql, (theme,) if theme else ())]

    def stage_record(self, theme: str) -> dict:
        """The latest finished attempt of each stage, as manifest.json and rejection.json keep it."""
        stages: dict[str, dict] = {}
        for a in self.attempts(theme):
            if a["status"] in ("done", "rejected"):
                stages[a["stage"]] = {"status": a["status"], "usd": a["usd"] or 0.0, "input_tokens": a["input_tokens"],
                                      "output_tokens": a["output_tokens"], "steps": a["steps"],
                                      "exit_status": a["exit_status"] or a["status"],
                                      "seconds": round((a["ended"] or a["started"]) - a["started"], 2)}
        return {"stages": stages}


def _theme_row(row: tuple) -> dict:
    out = dict(zip(THEME_COLUMNS, row))
    out["cause"] = _cause(out["cause"])
    return out


def _cause(written: str | None) -> RejectionCause | None:
    """A recorded cause as its shape (a kind this envforge does not know reads as an UnknownCause);
    None when none was recorded, or what is there is not a cause at all."""
    if not written:
        return None
    try:
        return RejectionCause.from_dict(json.loads(written), "themes.cause")
    except (ValueError, RecursionError, RecordError):
        return None
