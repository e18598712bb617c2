"""manifest.json: its one writer.

Several steps add their part to an environment's manifest — packaging (theme, tags, stages,
costs, file hashes), verification (its summary and difficulty baseline), reskin (the skins),
review (the human decision) — each through `update`, which reads the manifest, lets the caller
change it, and writes it back atomically as an `envforge.manifest/1` record.

`human_review` is written only by `envforge review`: `update` keeps the decision that is on disk
unless the caller passes a new one (`human_review=`), and `package.accept` — the pipeline's own
verdict — passes None, so a manifest.json a model wrote in its work folder cannot carry one
into an accepted folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pipeline import layout
from pipeline import records as files
from pipeline.errors import LocatedError

HUMAN_REVIEW = "human_review"
KEEP = object()  # update(): leave the human decision on disk as it is


def read(folder: str | Path) -> dict:
    """The manifest of `folder` (bounded, never through a link): {} when there is none or it is
    not a JSON object (a foreign or damaged file is rebuilt by the next update); refused when a
    newer envforge wrote it."""
    try:
        data = layout.EnvDir(Path(folder)).read_json(layout.MANIFEST)
    except LocatedError:
        return {}
    return data if isinstance(data, dict) else {}


def update(folder: str | Path, change: Callable[[dict], Any] = lambda m: None, *, human_review: Any = KEEP,
           rehash: bool = False) -> dict:
    """Read the manifest, apply `change` to it, write it back; returns what was written.
    `rehash`: refresh the sha256 of every file (else only when the manifest lists them)."""
    folder = Path(folder)
    manifest = read(folder)
    kept = manifest.get(HUMAN_REVIEW)
    manifest.setdefault("name", folder.name)
    change(manifest)
    decision = kept if human_review is KEEP else human_review
    manifest.pop(HUMAN_REVIEW, None)
    if isinstance(decision, dict):
        manifest[HUMAN_REVIEW] = decision
    if rehash or isinstance(manifest.get("files"), dict):
        manifest["files"] = layout.EnvDir.at(folder).file_hashes()
    files.write_json(folder / layout.MANIFEST, "manifest", manifest)
    return manifest
