"""`envforge reskin`: a new rendering (SkinEnv) over the same BaseEnv, checked dynamics-identical.

    styles.py    the template skins: json, narrative, inverse (AutoEnv E.3)
    model.py     a skin in any other style, written by the model and repaired from check feedback
    identity.py  the dynamics-identity check (base and skinned env side by side on every level)

A skin lives in the env folder as skins/<name>.py and, in a folder generate made, is listed in
manifest.json under "skins" (style, file, sha256, the identity check's figures); any other folder's
manifest (a reference environment's, tracked in a repository) is not changed. A skin that fails the check is moved to
skins/_rejected/<name>.py, where no worker will load it, and is not listed.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline import layout, manifest
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.kinds import Skin
from envforge.pipeline.reskin.identity import IdentityReport, check_identity
from envforge.pipeline.reskin.styles import TEMPLATE_STYLES, template_source
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

REJECTED = "_rejected"


@dataclass
class Reskinned:
    name: str
    style: str
    file: Path
    report: IdentityReport
    exit_status: str = "accepted"  # a model-written skin: how its ask-and-check loop ended (pipeline/llm/ask.py)

    def to_dict(self) -> dict:
        return {"name": self.name, "style": self.style, "file": str(self.file), "identity": self.report.to_dict(),
                "exit_status": self.exit_status}


def observation_samples(
    spec: EnvSpec, episodes: int = 1, seed: int = 0, limits: SandboxLimits | None = None
) -> list[dict]:
    """Semantic observations of every level: the reset and a random episode's steps."""
    rng = random.Random(seed)
    samples = []
    with EnvClient.open(spec, limits) as env:
        for level in spec.all_levels():
            samples.append(env.reset(level, seed, want_state=True).raw_obs)
            for _ in range(episodes):
                while True:
                    out = env.step(spec.actions.sample(rng), want_state=True)
                    samples.append(out.raw_obs)
                    if out.done:
                        break
                env.reset(level, seed)
    return [s for s in samples if isinstance(s, dict)]


def install(spec: EnvSpec, name: str, style: str, source: str, **check) -> Reskinned:
    """Write skins/<name>.py, check it, and list it in the manifest; a failing skin goes to skins/_rejected/."""
    path = spec.dir.skin_file(name)
    files.write_text(path, source)
    report = check_identity(spec, name, **check)
    return Reskinned(name, style, _settle(spec.dir, name, style, report), report)


def reskin_template(spec: EnvSpec, style: str, name: str | None = None, hint: bool = False, **check) -> Reskinned:
    """A json, narrative or inverse skin, written from its template (no model)."""
    name = name or style
    samples = observation_samples(spec) if style == "inverse" else None
    source = template_source(style, spec.name, name, samples, hint=hint)
    return install(spec, name, style, source, **check)


def recheck(spec: EnvSpec, name: str, **check) -> Reskinned:
    """Check an existing skin again (e.g. one written or edited by hand), with the same consequences."""
    listed = manifest.read(spec.path).skins.get(name)
    style = listed.style if listed else "hand-written"
    report = check_identity(spec, name, **check)
    return Reskinned(name, style, _settle(spec.dir, name, style, report), report)


def _settle(env: layout.EnvDir, name: str, style: str, report: IdentityReport) -> Path:
    """List a passing skin in the manifest; move a failing one to skins/_rejected/ and unlist it."""
    path = env.skin_file(name)
    if report.ok:
        _list(env, name, style, report)
        return path
    rejected = path.parent / REJECTED / path.name
    rejected.parent.mkdir(exist_ok=True)
    path.replace(rejected)
    _unlist(env, name)
    return rejected


def _list(env: layout.EnvDir, name: str, style: str, report: IdentityReport) -> None:
    """A folder generate made lists its skins in manifest.json; any other folder's manifest (a
    reference environment's, tracked in a repository) is not changed: the skin is skins/NAME.py."""
    if not manifest.made_by_generate(env.path):
        return
    rel = f"{layout.SKINS}/{name}.py"
    digest = hashlib.sha256(env.skin_file(name).read_bytes()).hexdigest()
    manifest.list_skin(env.path, name, Skin(style, rel, digest, {k: getattr(report, k) for k in (
        "levels", "sequences", "steps", "renderings", "renderings_differing")}))


def _unlist(env: layout.EnvDir, name: str) -> None:
    if manifest.made_by_generate(env.path):
        manifest.unlist_skin(env.path, name)


__all__ = ["IdentityReport", "Reskinned", "TEMPLATE_STYLES", "check_identity", "install", "observation_samples",
           "recheck", "reskin_template"]
