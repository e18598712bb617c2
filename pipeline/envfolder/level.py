"""A level of an environment, as every host-side caller names it: a level file of the folder, or a
seed the environment's generator makes one from. EnvSpec lists them; EnvClient.reset takes them;
records keep `str(level)`."""
from __future__ import annotations

from dataclasses import dataclass

SEED_PREFIX = "seed:"


@dataclass(frozen=True)
class Level:
    """A level: a level file of the folder ("levels/level_01.yaml"), or a seed the environment's
    generator makes one from (in the worker, never written to the folder). In records it is the
    text `str(level)` gives: the file, or "seed:N"."""

    file: str | None = None
    seed: int | None = None

    def __post_init__(self):
        if (self.file is None) == (self.seed is None):
            raise ValueError("a level is a file or a seed, exactly one of them")

    @classmethod
    def parse(cls, text: "str | Level") -> "Level":
        if isinstance(text, Level):
            return text
        text = str(text)
        if text.startswith(SEED_PREFIX):
            number = text[len(SEED_PREFIX):]
            if not number.lstrip("-").isdigit() or len(number) > 18:
                raise ValueError(f"expected a level file or 'seed:N' with an integer N, found {text!r}")
            return cls(seed=int(number))
        return cls(file=text)

    @property
    def generated(self) -> bool:
        return self.seed is not None

    def __str__(self) -> str:
        return f"{SEED_PREFIX}{self.seed}" if self.file is None else self.file
