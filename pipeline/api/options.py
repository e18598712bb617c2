"""The options of the library calls: typed dataclasses whose defaults are the only defaults.

Each call (`pipeline.api.evaluate.evaluate`, `generate`, `verify`, ...) takes one options class.
Its fields are named as the command's flags (`max_levels` is --max-levels), declare the default
and the check of the value (pipeline/api/values.py), and are built two ways:

- `Options.from_args(args)`: the command layer's parsed flags (each flag's default is read from
  the field, pipeline/commands/_flags.py; the command line's parser has checked the values with the same
  checks);
- `Options.from_keywords(call, **kw)`: the Python API's keywords (`envforge.evaluate(...,
  max_levels=2)`): an unknown keyword is a UserError naming the known ones; a value is checked as
  its flag's would be; None (or False for a switch) is "not given", i.e. the default.

A field may be a group of options (`group(LLMOptions)`): its fields are given flat, as flags are.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping, TypeVar

from pipeline.api.values import COUNT, SECONDS, USD, BadValue, one_of, out_dir
from pipeline.errors import UserError
from pipeline.llm.config import PROVIDERS

T = TypeVar("T", bound="Options")


def option(default: Any = None, check: Callable[[Any], Any] | None = None) -> Any:
    """A field: its default, and the check of a given value (also the flag's `type`)."""
    return dataclasses.field(default=default, metadata={"check": check} if check else {})


def group(cls: type) -> Any:
    """A field holding another options class, whose fields are given flat (as flags are)."""
    return dataclasses.field(default_factory=cls, metadata={"group": cls})


class Options:
    """Base of the options dataclasses (see the module docstring)."""

    @classmethod
    def names(cls) -> list[str]:
        """Every option, groups flattened, in declaration order."""
        out: list[str] = []
        for f in dataclasses.fields(cls):
            out += f.metadata["group"].names() if "group" in f.metadata else [f.name]
        return out

    @classmethod
    def field(cls, name: str) -> dataclasses.Field:
        """The field of the option `name` (looked up through the groups)."""
        for f in dataclasses.fields(cls):
            if "group" in f.metadata and name in f.metadata["group"].names():
                return f.metadata["group"].field(name)
            if f.name == name:
                return f
        raise KeyError(f"{cls.__name__} has no option {name!r}")

    @classmethod
    def default(cls, name: str) -> Any:
        f = cls.field(name)
        return f.default_factory() if f.default is dataclasses.MISSING else f.default

    def flat(self) -> dict[str, Any]:
        """Every option and its value, groups flattened (as `names()`)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out.update(value.flat() if "group" in f.metadata else {f.name: value})
        return out

    @classmethod
    def _build(cls: type[T], values: Mapping[str, Any]) -> T:
        given = {}
        for f in dataclasses.fields(cls):
            if "group" in f.metadata:
                given[f.name] = f.metadata["group"]._build(values)
            elif f.name in values:
                given[f.name] = values[f.name]
        return cls(**given)

    @classmethod
    def from_args(cls: type[T], args: Any) -> T:
        """From the command layer's parsed flags (a namespace whose attributes are named as the options;
        other attributes are ignored)."""
        return cls._build(vars(args))

    @classmethod
    def from_keywords(cls: type[T], call: str, **keywords: Any) -> T:
        """From the Python API's keywords: unknown ones and bad values are a UserError."""
        known = cls.names()
        unknown = sorted(k for k in keywords if k not in known)
        if unknown:
            raise UserError(f"{call}: expected keyword options among {', '.join(known)}; found "
                            f"{', '.join(unknown)}")
        values = {}
        for name, value in keywords.items():
            if value is None or (value is False and cls.default(name) is False):
                continue  # not given: the default
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            check = cls.field(name).metadata.get("check")
            if check is not None:
                try:
                    value = check(value)
                except BadValue as e:
                    raise UserError(f"{call}: {name}={value!r}: {e}") from None
            values[name] = value
        return cls._build(values)


@dataclasses.dataclass(frozen=True)
class LLMOptions(Options):
    """Which model provider a call uses and its limits: every model-calling command's flags."""

    model: str | None = None
    provider: str | None = option(None, one_of(*PROVIDERS))
    base_url: str | None = None
    api_key_env: str | None = None
    replay: str | None = None
    record: str | None = option(None, out_dir)
    no_cache: bool = False
    cache: str | None = None
    budget_usd: float | None = option(None, USD)
    theme_budget_usd: float | None = option(None, USD)
    prices: str | None = None
    max_concurrency: int | None = option(None, COUNT)
    timeout: float | None = option(None, SECONDS)

    def config(self):
        """The resolved provider configuration (a UserError saying how to configure one)."""
        from pipeline.llm.config import resolve

        return resolve(
            model=self.model, provider=self.provider, base_url=self.base_url, api_key_env=self.api_key_env,
            replay_dir=self.replay, record_dir=self.record, cache_path=self.cache, no_cache=self.no_cache,
            run_budget_usd=self.budget_usd, theme_budget_usd=self.theme_budget_usd, prices_file=self.prices,
            max_concurrency=self.max_concurrency, timeout=self.timeout,
        )

    def client(self, ledger=None):
        """A ready client, or a UserError explaining how to configure a provider."""
        from pipeline.llm.client import LLMClient

        return LLMClient(self.config(), ledger=ledger) if ledger is not None else LLMClient(self.config())


@dataclasses.dataclass(frozen=True)
class ExecutorOptions(Options):
    """Where a call's sandboxed work runs: this machine, or a Ray cluster's nodes."""

    executor: str = option("local", one_of("local", "ray"))
    ray_address: str | None = None

    def start(self):
        """The executor these options name (pipeline.sandbox.outside.executor.Executor), checked and ready:
        a Ray cluster is joined now, before the call writes anything."""
        from pipeline.sandbox.outside.executor import Executor

        if self.ray_address and self.executor != "ray":
            raise UserError(f"--ray-address {self.ray_address}: expected --executor ray with it, found --executor "
                            f"{self.executor}")
        return Executor(self.executor, self.ray_address if self.executor == "ray" else None).start()
