"""An environment's dynamics as a fingerprint, so the same game twice is caught (issue 36): under
another skin (what it renders), another name (its folder, its events) or another theme's words.

A fixed set of seeded action sequences (SEQUENCES of at most STEPS steps, each action picked by its
position among the declared space's candidates, not by its name) is played on the first LEVELS
levels the folder ships (or levels its generator makes from FALLBACK seeds). Each step adds what
the dynamics alone decide: the reward, whether the episode terminated or was truncated, which state
it reached (states numbered in the order first reached on that level, so neither the state's keys
nor its rendering count), and its events (numbered in the order first seen). The fingerprint is the
digest of those traces: equal fingerprints, the same dynamics on the same levels. Two environments
whose levels differ (another generator's seeds) fingerprint differently even if their rules agree:
the test is for copies, reskins and renames, which ship their source's levels.

Played in verify's execution stage (its worker, the one episode engine's client), recorded in its
figures (`dynamics`), compared across a run by `same_dynamics`.
"""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Iterable

from envforge.pipeline import layout, records
from envforge.pipeline.errors import UserError
from envforge.pipeline.kinds import Verification
from envforge.pipeline.sandbox.outside.client import EnvClient, Level

SEQUENCES = 4
STEPS = 24
LEVELS = 3
FALLBACK = (1, 2, 3)
VERSION = "dynamics/1"  # what the digest is of: a change to the traces is a new version


def fingerprint(env: EnvClient, candidates: list[dict], levels: list[Level], max_steps: int) -> str:
    """The digest of the traces of SEQUENCES seeded action sequences on each of `levels` (the first
    LEVELS), played in `env`. `candidates`: the declared space's actions in their declared order."""
    if not candidates:
        return ""
    traces = []
    for level in levels[:LEVELS] or [Level(seed=s) for s in FALLBACK]:
        for sequence in range(SEQUENCES):
            traces.append(_trace(env, level, candidates, random.Random(sequence), min(STEPS, max_steps)))
    return VERSION + ":" + hashlib.sha256(json.dumps(traces).encode()).hexdigest()[:24]


def _trace(env: EnvClient, level: Level, candidates: list[dict], rng: random.Random, steps: int) -> list:
    states: dict[str, int] = {}
    events: dict[str, int] = {}
    first = env.reset(level)
    states[first.state_hash] = 0
    trace = []
    for _ in range(steps):
        index = rng.randrange(len(candidates))
        out = env.step(candidates[index])
        state = states.setdefault(out.state_hash, len(states))
        seen = sorted(events.setdefault(str(e), len(events)) for e in out.events)
        trace.append([index, round(float(out.reward), 6), out.terminated, out.truncated, state, seen])
        if out.done:
            break
    return trace


def dynamics_of(env_dir: Path) -> str:
    """The fingerprint verify recorded for the folder `env_dir` ("" when it recorded none or its
    verification.json does not read)."""
    try:
        verification = records.read(env_dir / layout.VERIFICATION, Verification)  # None: no such file
    except (OSError, UserError):  # a RecordError is one
        return ""
    execution = verification.stages.execution if verification is not None else None
    return (execution.dynamics or "") if execution is not None else ""


def same_dynamics(fingerprints: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """name -> the other names whose fingerprint equals its own, for each (name, fingerprint) given
    (a missing fingerprint matches nothing), in the order given."""
    by_print: dict[str, list[str]] = {}
    for name, print_ in fingerprints:
        if print_:
            by_print.setdefault(print_, []).append(name)
    return {name: [other for other in names if other != name]
            for names in by_print.values() if len(names) > 1 for name in names}
