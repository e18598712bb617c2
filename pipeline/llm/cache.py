"""The on-disk response cache: SQLite in WAL mode, content-addressed.

The key is the SHA-256 of the canonical JSON of provider, model, messages, tools and sampling
parameters (plus `sample`, which callers that want several answers to one prompt vary).
Many processes may read and write one cache file at once: WAL lets readers proceed during a
write, writers wait on the lock (busy timeout), and an insert of a key that another writer
stored first is harmless because equal keys mean interchangeable answers.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from envforge.pipeline import records as files
from envforge.pipeline import safe_io
from envforge.pipeline.llm.messages import Response
from envforge.pipeline.located import LocatedError

log = logging.getLogger("envforge.llm")
# An entry: {"tool_calls": [{"arguments": {...}}]}, the arguments as deep as a reply may send them.
ENTRY_DEPTH = 3 + safe_io.MAX_DEPTH

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def cache_key(provider: str, material: dict[str, Any], sample: int = 0) -> str:
    canonical = json.dumps({"provider": provider, "request": material, "sample": sample},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = files.open_sqlite(self.path, SCHEMA, "response_cache", timeout=60)
        try:
            db.execute("PRAGMA busy_timeout=60000")
            db.execute("PRAGMA journal_mode=WAL")
        finally:
            db.close()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA busy_timeout=60000")
        return db

    def get_sync(self, key: str, most: int | None = None) -> Response | None:
        """The entry of `key`, None when there is none. With `most`, an entry longer than `most`
        characters is not read (SQLite measures it) and not served, nor is one the bounded JSON
        reader refuses: an entry is a model's reply, as untrusted as when it came."""
        db = self._connect()
        try:
            row = db.execute("SELECT CASE WHEN ? IS NULL OR length(response) <= ? THEN response END, "
                             "length(response) FROM responses WHERE key = ?", (most, most, key)).fetchone()
        finally:
            db.close()
        if row is None:
            return None
        if row[0] is None:
            log.warning("response cache %s: the entry %s is %s characters, more than %s: not served",
                        self.path, key[:12], f"{row[1]:,}", f"{most:,}")
            return None
        try:
            data = safe_io.parse_json(row[0], f"{self.path}: entry {key[:12]}", finite=False, most=ENTRY_DEPTH)
            return Response.from_dict(data, source="cache")
        except (LocatedError, TypeError, AttributeError, ValueError) as exc:
            log.warning("response cache %s: the entry %s is unreadable (%s): not served", self.path, key[:12],
                        str(exc)[:200])
            return None

    def put_sync(self, key: str, provider: str, response: Response) -> None:
        db = self._connect()
        try:
            with db:
                db.execute(
                    "INSERT OR IGNORE INTO responses (key, provider, model, response, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (key, provider, response.model, json.dumps(response.to_dict()), time.time()),
                )
        finally:
            db.close()

    async def get(self, key: str, most: int | None = None) -> Response | None:
        return await asyncio.to_thread(self.get_sync, key, most)

    async def put(self, key: str, provider: str, response: Response) -> None:
        await asyncio.to_thread(self.put_sync, key, provider, response)

    def __len__(self) -> int:
        db = self._connect()
        try:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        finally:
            db.close()
