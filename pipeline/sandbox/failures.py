"""Typed failures: everything that can go wrong in a worker ends as one of these."""
from __future__ import annotations

from dataclasses import asdict, dataclass

KINDS = {
    "exception": "the environment's code raised",
    "timeout": "a call took longer than its wall-clock limit",
    "wall_clock": "an episode or a run took longer than its wall-clock budget",
    "cpu_limit": "the worker used up its CPU seconds",
    "memory": "the worker ran out of its memory limit",
    "exit": "the environment ended the worker process",
    "crash": "the worker died from a signal",
    "output_limit": "the worker printed more than its output limit",
    "not_json": "the environment returned data that is not plain JSON",
    "invalid_reward": "reward is not a finite number",
    "protocol": "the worker broke the message protocol",
    "load": "the environment could not be loaded",
    "usage": "the parent asked for something the environment does not have",
}


@dataclass
class SandboxFailure(Exception):
    kind: str
    detail: str
    where: str = ""  # "env_main.py:42" when known
    output: str = ""  # tail of the worker's stdout/stderr
    op: str = ""

    def __post_init__(self):
        super().__init__(str(self))

    def __str__(self) -> str:
        loc = f"{self.where}: " if self.where else ""
        return f"{loc}{self.kind}: {self.detail}"

    def to_dict(self) -> dict:
        return asdict(self)
