"""The price table: tokens to dollars. Shipped as data (prices.yaml), overridable by the user."""
from __future__ import annotations

import fnmatch
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from envforge.pipeline.errors import UserError
from envforge.pipeline.llm.messages import Usage

DEFAULT_PRICES = Path(__file__).with_name("prices.yaml")
DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
        ) / 1_000_000


class PriceTable:
    def __init__(self, entries: dict[str, Price]):
        self.entries = entries

    @staticmethod
    def load(override: str | Path | None = None) -> "PriceTable":
        entries = _read(DEFAULT_PRICES)
        override = override or os.environ.get("ENVFORGE_PRICES")
        if override:
            entries.update(_read(Path(override)))
        return PriceTable(entries)

    def lookup(self, model: str) -> Price | None:
        """Exact key, else the key without a date suffix (`-20250929`, `-2024-08-06`),
        else the longest `*` pattern that matches."""
        for name in (model, DATE_SUFFIX.sub("", model)):
            if name in self.entries:
                return self.entries[name]
        matches = [k for k in self.entries if "*" in k and fnmatch.fnmatchcase(model, k)]
        return self.entries[max(matches, key=len)] if matches else None


def _read(path: Path) -> dict[str, Price]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise UserError(f"price table {path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"price table {path}: expected UTF-8 YAML text, found byte {exc.object[exc.start]:#04x} "
                        f"at offset {exc.start}") from exc
    except yaml.YAMLError as exc:
        raise UserError(f"price table {path}: not valid YAML: {exc}") from exc
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise UserError(f"price table {path}: expected a mapping under 'models:', found {type(models).__name__}")
    entries: dict[str, Price] = {}
    for key, value in models.items():
        try:
            price = Price(**{k: float(v) for k, v in value.items()})
            if not all(math.isfinite(x) and x >= 0 for x in vars(price).values() if x is not None):
                raise ValueError("prices must be finite and >= 0")
            entries[str(key)] = price
        except (TypeError, ValueError, AttributeError) as exc:
            raise UserError(
                f"price table {path}: models.{key}: expected {{input: N, output: N[, cache_read: N, "
                f"cache_write: N]}} in dollars per million tokens, found {value!r}"
            ) from exc
    return entries
