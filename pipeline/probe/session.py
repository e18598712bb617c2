"""What every probe maker shares: the env, its actions and levels, a worker, and playing sequences."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.probe.items import Start
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient, Observation, StepResult


@dataclass
class ProbeSession:
    spec: EnvSpec
    worker: EnvClient
    skin: str | None
    rng: random.Random
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> items given up
    cache: dict = field(default_factory=dict)  # facts about the env found once (e.g. stochastic)

    @property
    def levels(self) -> list[str]:
        return [str(level) for level in self.spec.all_levels()]  # items keep a level as its text

    @property
    def instruction(self) -> str:
        return self.spec.instruction  # read once by EnvSpec, never through a link

    def item_fields(self, kind: str, number: int, start: Start) -> dict:
        return {"id": f"{self.spec.name}/{kind}/{number:04d}", "env": self.spec.name,
                "env_dir": str(self.spec.path), "skin": self.skin, "instruction": self.instruction,
                "start": start}

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def random_actions(self, count: int, choices: list[dict] | None = None) -> list[dict]:
        return [self.rng.choice(choices or self.spec.actions.candidates()) for _ in range(count)]

    def begin(self, start: Start, worker: EnvClient | None = None) -> Observation | None:
        """Reset to `start` and play its prefix: the last reply (its observation), or None when the
        episode ended during the prefix."""
        worker = worker or self.worker
        out = worker.reset(start.level, start.seed, want_state=True)
        for action in start.prefix:
            out = worker.step(action, want_state=True)
            if out.done:
                return None
        return out

    def stochastic(self, levels: int = 2, length: int = 10) -> bool:
        """Whether the same actions from the same levels give other observations under other seeds
        (found once, with the session's RNG left as it was)."""
        if "stochastic" not in self.cache:
            rng_state = self.rng.getstate()
            runs = set()
            for level in self.levels[:levels]:
                actions = self.random_actions(length)
                for seed in (0, 1, 2):
                    first = self.begin(Start(level, seed, []))
                    runs.add((level, first.observation, tuple(r.observation for r in self.play(actions))))
            self.rng.setstate(rng_state)
            self.cache["stochastic"] = len(runs) > len(self.levels[:levels])
        return self.cache["stochastic"]

    def play(self, actions: list[dict], worker: EnvClient | None = None) -> list[StepResult]:
        """Step `actions` from the current state; the replies, fewer when the episode ends."""
        worker = worker or self.worker
        replies = []
        for action in actions:
            replies.append(worker.step(action, want_state=True))
            if replies[-1].done:
                break
        return replies


def open_env(env_dir: str, skin: str | None) -> EnvSpec:
    """The env, or a UserError saying what is missing (folder, actions, levels, skin)."""
    spec = EnvSpec.open(env_dir, full_paths=False).playable()  # a LocatedError names the file
    if not spec.all_levels():
        raise UserError(f"{spec.path}: expected level files under levels/ or val_levels/, found none")
    if skin is not None and skin not in spec.dir.skins():
        raise UserError(f"--skin {skin}: expected skins/{skin}.py in {spec.path}, found "
                        f"{', '.join(spec.dir.skins()) or 'no skins'} (make one with envforge reskin)")
    return spec


def open_session(spec: EnvSpec, skin: str | None, seed: int, limits: SandboxLimits | None = None) -> ProbeSession:
    return ProbeSession(spec, EnvClient.start(spec, limits, skin), skin, random.Random(seed))
