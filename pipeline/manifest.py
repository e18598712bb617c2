"""manifest.json: its one writer, through typed operations.

Several steps add their part to an environment's manifest (pipeline.kinds.Manifest), each with
its own operation here, which reads the manifest, changes its part and writes it back atomically
as an `envforge.manifest/1` record:
  * `packaged`  — generate's package stage: theme, tags, model, seed, stages, cost, file hashes;
  * `reference` — a hand-written reference environment: theme, tags, origin, file hashes;
  * `verified`  — verify: its summary and the random agent's difficulty baseline;
  * `list_skin` / `unlist_skin` — reskin;
  * `decided`   — `envforge review accept|reject`: the human decision.

`human_review` is written only by `envforge review`: every other operation keeps the decision that
is on disk, and `packaged` — the pipeline's own verdict — is given the decision explicitly (None
from generate), so a manifest.json a model wrote in its work folder cannot carry one into an
accepted folder.
"""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Callable

from envforge.pipeline import layout
from envforge.pipeline import records as files
from envforge.pipeline.kinds import (
    DifficultyBaseline,
    EnvOrigin,
    Generated,
    HumanReview,
    Manifest,
    RecordError,
    Skin,
    Verification,
    VerificationSummary,
)
from envforge.pipeline.located import LocatedError

_KEEP = object()  # leave the human decision on disk as it is


GENERATED = "envforge generate"  # the origin of the folders generate made (verify writes into those by default)


def made_by_generate(folder: Path) -> bool:
    """A folder `envforge generate` made, whose records the commands that judge it keep up to date
    (verify's verification, reskin's skin list): its manifest names generate as its origin. Any other
    folder (a hand-written reference, an AutoEnv folder, a copy in a repository) is judged, and its
    files are not changed unless the user says so (verify --write)."""
    return read(folder).origin == GENERATED

def read(folder: str | Path) -> Manifest:
    """The manifest of `folder` (bounded, never through a link). One that is absent, not JSON or
    not of the manifest's shape reads as a new manifest (a foreign or damaged file is rebuilt by
    the next operation); one a newer envforge wrote is refused (RecordError)."""
    folder = Path(folder)
    try:
        data = layout.EnvDir(folder).read_json(layout.MANIFEST)
    except LocatedError:
        data = None
    if isinstance(data, dict):
        try:
            manifest = Manifest.from_dict(data, str(folder / layout.MANIFEST))
            manifest.name = manifest.name or folder.name
            return manifest
        except RecordError:
            pass
    return Manifest(name=folder.name)


def packaged(folder: Path, origin: EnvOrigin, generated: Generated, human_review: HumanReview | None) -> Manifest:
    """generate's package stage: the environment's origin and how generate made it (verify wrote its
    part before)."""
    def change(m: Manifest) -> None:
        for part in (origin, generated):
            for f in dataclasses.fields(part):
                setattr(m, f.name, copy.copy(getattr(part, f.name)))
    return _update(folder, change, human_review=human_review, rehash=True)


def reference(folder: Path, theme: str, tags: dict, origin: str = "hand-written reference") -> Manifest:
    """A hand-written reference environment's manifest, made afresh (no decision, no verdict)."""
    def change(m: Manifest) -> None:
        for name, value in vars(Manifest(name=folder.name, theme=theme, tags=dict(tags), origin=origin)).items():
            setattr(m, name, value)
    return _update(folder, change, human_review=None, rehash=True)


def verified(folder: Path, summary: VerificationSummary, baseline: DifficultyBaseline | None) -> Manifest:
    """verify's verdict and, when reliability ran, the random agent's difficulty baseline. A
    manifest that is not JSON is rebuilt from what verify knows."""
    def change(m: Manifest) -> None:
        m.verification, m.confinement, m.runs_as = summary, summary.confinement, summary.runs_as or None
        if baseline is not None:
            m.difficulty_baseline = baseline
    return _update(folder, change)


def list_skin(folder: Path, name: str, skin: Skin) -> Manifest:
    return _update(folder, lambda m: m.skins.__setitem__(name, skin))


def unlist_skin(folder: Path, name: str) -> None:
    if name in read(folder).skins:
        _update(folder, lambda m: m.skins.pop(name, None))


def decided(folder: Path, review: HumanReview) -> Manifest:
    """`envforge review`'s decision (the only writer of human_review)."""
    return _update(folder, lambda m: None, human_review=review)


def _update(folder: str | Path, change: Callable[[Manifest], Any], *, human_review: Any = _KEEP,
            rehash: bool = False) -> Manifest:
    """Read the manifest, apply `change`, write it back; returns what was written. `rehash`:
    refresh the sha256 of every file (else only when the manifest lists them)."""
    folder = Path(folder)
    manifest = read(folder)
    kept = manifest.human_review
    change(manifest)
    manifest.human_review = kept if human_review is _KEEP else human_review
    if rehash or manifest.files is not None:
        manifest.files = layout.EnvDir.at(folder).file_hashes()
    files.write(folder / layout.MANIFEST, manifest)
    return manifest


@dataclasses.dataclass(frozen=True)
class Acceptance:
    """Whether envforge accepted an environment folder, and what decided it (said to a user)."""
    accepted: bool
    why: str


def acceptance(folder: str | Path) -> Acceptance:
    """What envforge decided of the environment at `folder`: a person's decision (`envforge review
    accept|reject`, the manifest's human_review) stands over verify's verdict (verification.json, else
    the manifest's copy of it); a folder no verify judged, or whose verification.json cannot be read
    (another kind, a newer envforge's, not of its shape), is not accepted."""
    folder = Path(folder)
    m = read(folder)
    if m.human_review is not None and m.human_review.decision in ("accepted", "rejected"):
        return Acceptance(m.human_review.decision == "accepted", f"{m.human_review.decision} by a person "
                          f"(envforge review){': ' + m.human_review.reason if m.human_review.reason else ''}")
    try:
        verdict = files.read(folder / layout.VERIFICATION, Verification) or m.verification
    except (RecordError, LocatedError) as e:
        return Acceptance(False, f"its {layout.VERIFICATION} cannot be read: {e}")
    if verdict is None:
        return Acceptance(False, f"never verified (no {layout.VERIFICATION}; envforge verify --write judges it)")
    if verdict.accepted:
        return Acceptance(True, "accepted by envforge verify")
    return Acceptance(False, f"rejected by envforge verify at {verdict.stage or 'a stage'}"
                             f"{': ' + verdict.reason[:300] if verdict.reason else ''}")
