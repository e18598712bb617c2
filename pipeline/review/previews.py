"""Level previews for the report: the first observation of a few levels, rendered by the
environment itself in a sandbox worker (its code is never imported here)."""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline import layout
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import DEFAULT_MAX_STEPS, claimed_max_rewards
from envforge.pipeline.errors import LocatedError
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient


@dataclass
class Preview:
    level: str  # "levels/level_01.yaml", or "seed 0" for a level generated on the spot
    observation: str = ""
    error: str = ""  # why it could not be rendered (the environment failed)
    max_reward: float | None = None


def previews(folder: Path, count: int) -> list[Preview]:
    """The first `count` test levels (validation levels when there are none; levels generated from
    seeds 0, 1, ... when the folder has no level files, e.g. a theme rejected before verification)."""
    env = layout.EnvDir.at(folder)
    if count <= 0:
        return []
    if env.missing_required():
        return [Preview("(none)", error=f"the folder has no {', '.join(env.missing_required())} to render levels with")]
    try:
        levels = (env.levels("test") or env.levels("val"))[:count]
    except LocatedError as e:  # a link in place of levels/
        return [Preview("(none)", error=str(e))]
    wanted = levels or [None] * count
    maxima = _claimed(folder)
    shown: list[Preview] = []
    try:
        # Only resets here: no step, so the step cap plays no part.
        with contextlib.closing(EnvClient.start_folder(env.path, DEFAULT_MAX_STEPS)) as client:
            for i, level in enumerate(wanted):
                label = level or f"seed {i}"
                try:
                    first = client.reset(Level(file=level) if level else Level(seed=i))
                    shown.append(Preview(label, _text(first.observation),
                                         max_reward=maxima.get(layout.level_key(level)) if level else None))
                except SandboxFailure as failure:
                    shown.append(Preview(label, error=f"reset failed: {failure}"))
                    break  # a worker that failed once is gone
    except SandboxFailure as failure:
        shown.append(Preview("(loading the environment)", error=f"the environment did not load: {failure}"))
    return shown


def _text(observation) -> str:
    return observation if isinstance(observation, str) else json.dumps(observation, indent=2, default=str)


def _claimed(folder: Path) -> dict[str, float]:
    """The folder's claimed max rewards; {} when level_max_rewards.json is absent or unfit (a
    rejected theme's folder may hold anything: the preview still shows its levels)."""
    try:
        return claimed_max_rewards(layout.EnvDir.at(folder).read_json(layout.LEVEL_MAX_REWARDS))
    except LocatedError:
        return {}
