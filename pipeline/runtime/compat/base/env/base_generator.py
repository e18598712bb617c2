"""AutoEnv-format compatibility: `from base.env.base_generator import WorldGenerator`.

Written to the published interface: a generator is built as `Generator(env_id, config)` and
its `generate(seed=None, save_path=None)` writes one level file and returns its world id.
The environment's own subclass does the work; this base only keeps what it was given.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class WorldGenerator(ABC):
    def __init__(self, env_id: Any = None, config: dict[str, Any] | None = None):
        self.env_id = env_id
        self.config = config if config is not None else {}

    @abstractmethod
    def generate(self, seed: int | None = None, save_path: str | None = None) -> str:
        """Generate one world, save it, and return its world id."""

__all__ = ["WorldGenerator"]
