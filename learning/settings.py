"""The settings of a learning study: what `envforge learn`'s flags set, saved in study.json.

Defaults follow the paper (10 iterations, 3 runs per level); the test levels are all of each
environment's levels/ unless `test_levels` says how many.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from envforge.pipeline.evaluate import Limits, ModelOptions
from envforge.pipeline.kinds import LearnSettings
from envforge.pipeline.levelmax import SEARCH_NODES, SEARCH_SECONDS


@dataclass(frozen=True)
class Settings:
    iterations: int = 10
    runs: int = 3  # per level, on training and test levels
    train_levels: int = 3  # fresh levels per iteration
    test_levels: int | None = None  # the first N of levels/; None: all
    max_parents: int = 2  # Pareto selection: front members optimized per iteration
    concurrency: int = 8  # episodes at once (one at a time when recording or replaying)
    max_steps: int = 0  # turns per episode; 0: the environment's termination.max_steps
    signal_episodes: int = 3  # trajectories shown to the signal step
    search_nodes: int = SEARCH_NODES  # certifying a training level's max reward, as verify does
    search_seconds: float = SEARCH_SECONDS  # verify's safety stop per search
    max_tokens: int = 4096
    temperature: float | None = None
    history: int = 10

    @property
    def limits(self) -> Limits:
        return Limits(max_steps=self.max_steps)

    @property
    def model_options(self) -> ModelOptions:
        return ModelOptions(self.max_tokens, self.temperature, self.history)

    def to_dict(self) -> dict:
        return asdict(self)

    def recorded(self) -> LearnSettings:
        """What a study (and a recording) keeps of them: all but `concurrency`, which may change on every run."""
        return LearnSettings(**{k: v for k, v in self.to_dict().items() if k != "concurrency"})

    @classmethod
    def from_dict(cls, data: dict) -> "Settings":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
