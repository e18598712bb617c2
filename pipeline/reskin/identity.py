"""The dynamics-identity check: a skin may change what the agent reads, never what happens.

The base env and the skinned env (two sandbox workers over the same folder) play the same action
sequences side by side on every level: the planner's witness (search over snapshots) and random
sequences (with some malformed actions, as agents really send them). After the reset and after
every step their state hashes, rewards, done flags, step counters and events must be equal, and
the skin must return text. The renderings are compared too: a skin that renders nothing
differently is no skin.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from envforge.pipeline import layout, planner
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

# What must be equal after a reset or a step of the two envs.
COMPARED = ("state_hash", "t", "reward", "terminated", "truncated", "events")


@dataclass
class IdentityReport:
    skin: str
    ok: bool = False
    levels: int = 0
    sequences: int = 0
    steps: int = 0
    renderings: int = 0  # observations compared (resets and steps)
    renderings_differing: int = 0
    mismatch: dict | None = None  # the first difference: level, sequence, step, field, base, skinned
    reason: str = ""
    examples: dict = field(default_factory=dict)  # one base and one skinned rendering

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        if not self.ok:
            return f"FAILED: {self.reason}"
        return (f"dynamics identical on {self.levels} levels ({self.sequences} action sequences, {self.steps} steps); "
                f"{self.renderings_differing}/{self.renderings} renderings differ")


def check_identity(spec: EnvSpec, skin: str, random_sequences: int = 2, seed: int = 0,
                   planner_nodes: int = 3_000, planner_seconds: float = 60.0,
                   invalid_rate: float = 0.1, limits: SandboxLimits | None = None) -> IdentityReport:
    """Play base and skinned env side by side on every level of `spec.dir`; see the module docstring."""
    report = IdentityReport(skin)
    rng = random.Random(seed)
    levels = spec.all_levels()
    bounds = spec.max_rewards  # the search may stop once it reaches a level's max reward
    if not levels:
        report.reason = "expected level files under levels/ or val_levels/, found none"
        return report
    base = EnvClient.start(spec, limits)
    try:
        try:
            skinned = EnvClient.start(spec, limits, skin)
        except SandboxFailure as f:
            report.reason = f"{f.where or f'skins/{skin}.py'}: the skin does not load: {f.kind}: {f.detail}"
            return report
        try:
            for level in levels:
                report.levels += 1
                base.reset(level, seed)
                # Any rewarding sequence will do here, so equal states at different steps are merged
                # (a deep witness is found in a fraction of the nodes); it is replayed step by step below.
                witness = planner.search(base, spec, max_nodes=planner_nodes, seconds=planner_seconds,
                                         stop_at=bounds.get(layout.level_key(str(level)))).witness
                plans = ([witness] if witness else []) + [
                    [spec.actions.sample(rng, invalid_rate) for _ in range(spec.max_steps)]
                    for _ in range(random_sequences)]
                for number, actions in enumerate(plans):
                    report.sequences += 1
                    mismatch = _side_by_side(base, skinned, level, seed, actions, report)
                    if mismatch:
                        mismatch["sequence"] = "planner witness" if witness and number == 0 else "random"
                        report.mismatch = mismatch
                        report.reason = (f"{level}, {mismatch['sequence']} sequence, "
                                         f"{'reset' if mismatch['step'] == 0 else 'step ' + str(mismatch['step'])}: "
                                         f"{mismatch['field']} differs (base {mismatch['base']!r}, "
                                         f"skin {mismatch['skinned']!r}): the skin changes the dynamics")
                        return report
        except SandboxFailure as f:
            where = f.where or f"skins/{skin}.py"
            report.reason = f"{where}: {f.kind}: {f.detail}"
            return report
        finally:
            skinned.close()
    finally:
        base.close()
    if report.renderings_differing == 0:
        report.reason = f"the skin renders all {report.renderings} observations exactly as the env does"
        return report
    report.ok = True
    return report


def _side_by_side(base: EnvClient, skinned: EnvClient, level: Level, seed: int, actions: list[dict],
                  report: IdentityReport) -> dict | None:
    a = base.reset(level, seed)
    b = skinned.reset(level, seed)
    for step in range(len(actions) + 1):
        if step:
            a = base.step(actions[step - 1])
            b = skinned.step(actions[step - 1])
            report.steps += 1
        for name in COMPARED:
            if hasattr(a, name) and getattr(a, name) != getattr(b, name):
                return {"level": str(level), "step": step, "field": name, "base": getattr(a, name),
                        "skinned": getattr(b, name), "actions": actions[:step]}
        if not isinstance(b.observation, str):
            return {
                "level": str(level),
                "step": step,
                "field": "observation type",
                "base": type(a.observation).__name__,
                "skinned": type(b.observation).__name__,
                "actions": actions[:step],
            }
        report.renderings += 1
        if a.observation != b.observation:
            report.renderings_differing += 1
            report.examples = report.examples or {"base": a.observation, "skinned": b.observation}
        if getattr(a, "done", False):
            return None
    return None
