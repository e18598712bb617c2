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
import sqlite3
import time
from pathlib import Path
from typing import Any

from envforge.pipeline import records as files
from envforge.pipeline.llm.messages import Response

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

    def get_sync(self, key: str) -> Response | None:
        db = self._connect()
        try:
            row = db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
        return None if row is None else Response.from_dict(json.loads(row[0]), source="cache")

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

    async def get(self, key: str) -> Response | None:
        return await asyncio.to_thread(self.get_sync, key)

    async def put(self, key: str, provider: str, response: Response) -> None:
        await asyncio.to_thread(self.put_sync, key, provider, response)

    def __len__(self) -> int:
        db = self._connect()
        try:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        finally:
            db.close()
