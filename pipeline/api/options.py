"""The options of the library calls: typed dataclasses whose defaults are the only defaults.

Each call (`pipeline.api.evaluate.evaluate`, `generate`, `verify`, ...) takes one options class.
Each option is declared once, as a field: its name (`max_levels` is the flag --max-levels), its
default, the check of a value (pipeline/api/values.py), and what the command's help says of it
(`option(3, COUNT, help="runs per level (default {default})")`). The command layer derives its
flags from these fields (pipeline/commands/_flags.py); the options are built two ways:

- `Options.from_args(args)`: the command layer's parsed flags (the parser has checked the values
  with the same checks);
- `Options.from_keywords(call, **kw)`: the Python API's keywords (`envforge.evaluate(...,
  max_levels=2)`): an unknown keyword is a UserError naming the known ones; a value is checked as
  its flag's would be; None (or False for a switch) is "not given", i.e. the default.

A field may be a group of options (`group(LLMOptions)`): its fields are given flat, as flags are.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable, ClassVar, Mapping, TypeVar

from envforge.pipeline.api.values import COUNT, SECONDS, USD, BadValue, number, one_of, out_dir, whole
from envforge.pipeline.errors import UserError
from envforge.pipeline.llm.config import PROVIDERS, LLMConfig

T = TypeVar("T", bound="Options")
# a flag, and its value: the word before a colon, or a metavar (STYLE)
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)( [^\s:,]+(?=:)| [A-Z][A-Z_]*\b)?")


def option(default: Any = None, check: Callable[[Any], Any] | None = None, *, help: str = "",
           metavar: str | None = None, flags: tuple[str, ...] = (), section: str | None = None,
           exclusive: str | None = None) -> Any:
    """A field: its default, the check of a given value, and how the command line shows it: `help`
    (`{default}` in it is the default), `metavar`, its `flags` (default --NAME), the `section` of the
    help it is listed under, and the `exclusive` set of options of which at most one may be given
    (one must be, when the class names the set in REQUIRED)."""
    shown = {"check": check, "help": help, "metavar": metavar, "flags": flags, "section": section,
             "exclusive": exclusive}
    return dataclasses.field(default=default, metadata={k: v for k, v in shown.items() if v})


def group(cls: type) -> Any:
    """A field holding another options class, whose fields are given flat (as flags are), listed
    under the class's SECTION."""
    return dataclasses.field(default_factory=cls, metadata={"group": cls})


class Options:
    """Base of the options dataclasses (see the module docstring)."""

    SECTION: ClassVar[str | None] = None  # the help's section of these options, as a group of another class's
    REQUIRED: ClassVar[tuple[str, ...]] = ()  # `exclusive` sets of which one option must be given
    # Where an option left at None ("not given") takes its value from another class's attribute of
    # the same name (a configuration resolved later): that class, whose default the help's {default} names.
    DEFAULTS_FROM: ClassVar[type | None] = None

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

    @staticmethod
    def flags_of(f: dataclasses.Field) -> tuple[str, ...]:
        """The command line's flags of the option `f`: those it declares, else --NAME (dashes for
        underscores). The one rule, for the parser (pipeline/commands/_flags.py) and in_keywords."""
        return f.metadata.get("flags") or ("--" + f.name.replace("_", "-"),)

    @classmethod
    def in_keywords(cls, message: str) -> str:
        """An error's message as a Python call says it: each of these options' flags by its keyword
        (`--out runs/x: ...` -> `out=runs/x: ...`, `--style STYLE` -> `style=STYLE`, `pass --resume` ->
        `pass resume=True`, `--runs and --max-levels` -> `runs and max_levels`); other text as it is."""
        known = {}
        for name in cls.names():
            f = cls.field(name)
            known.update(dict.fromkeys(cls.flags_of(f), (name, cls.default(name) is False)))

        def said(match: re.Match) -> str:
            if match.group(1) not in known:
                return match.group(0)
            name, switch = known[match.group(1)]
            if switch:
                return f"{name}=True" + (match.group(2) or "")
            return f"{name}={match.group(2)[1:]}" if match.group(2) else name

        return _FLAG.sub(said, message)

    @classmethod
    def default(cls, name: str) -> Any:
        f = cls.field(name)
        return f.default_factory() if f.default is dataclasses.MISSING else f.default

    @classmethod
    def shown_default(cls, f: dataclasses.Field) -> Any:
        """The default the help of the option `f` names as {default}: its own, or, left at None, that
        of DEFAULTS_FROM."""
        if f.default is None and cls.DEFAULTS_FROM is not None:
            return getattr(cls.DEFAULTS_FROM, f.name)
        return f.default

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
                except (BadValue, TypeError, ValueError) as e:
                    raise UserError(f"{call}: {name}={value!r}: {e}") from None
            values[name] = value
        return cls._build(values)


@dataclasses.dataclass(frozen=True)
class LLMOptions(Options):
    """Which model provider a call uses and its limits: every model-calling command's flags."""

    SECTION = "model provider"
    DEFAULTS_FROM = LLMConfig
    model: str | None = option(None, metavar="SPEC", help="anthropic/<model> or openai/<model> (default: "
                               "$ENVFORGE_MODEL, else from the keys set)")
    provider: str | None = option(None, one_of(*PROVIDERS), help="provider, if SPEC does not name one")
    base_url: str | None = option(None, metavar="URL", help="API base URL, e.g. an OpenAI-compatible server "
                                  "(default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)")
    api_key_env: str | None = option(None, metavar="VAR", help="read the API key from this environment variable "
                                     "instead of the provider's usual one")
    replay: str | None = option(None, metavar="DIR", help="serve recorded responses from DIR (with --provider replay)")
    record: str | None = option(None, out_dir, metavar="DIR", help="write every call and its response to DIR")
    no_cache: bool = option(False, help="neither read nor write the response cache")
    cache: str | None = option(None, metavar="PATH", help="response cache file (default: $ENVFORGE_CACHE or "
                               "~/.cache/envforge/responses.sqlite)")
    budget_usd: float | None = option(None, USD, metavar="USD", help="stop before the run spends more than USD")
    theme_budget_usd: float | None = option(None, USD, metavar="USD",
                                            help="stop a theme before it spends more than USD")
    prices: str | None = option(None, metavar="FILE",
                                help="price table overriding the shipped one (same YAML format)")
    max_concurrency: int | None = option(None, COUNT, metavar="N",
                                         help="model calls in flight at once (default {default})")
    timeout: float | None = option(None, SECONDS, metavar="SECONDS",
                                   help="limit for one call attempt (default {default})")

    def config(self):
        """The resolved provider configuration (a UserError saying how to configure one)."""
        from envforge.pipeline.llm.config import resolve

        return resolve(
            model=self.model, provider=self.provider, base_url=self.base_url, api_key_env=self.api_key_env,
            replay_dir=self.replay, record_dir=self.record, cache_path=self.cache, no_cache=self.no_cache,
            run_budget_usd=self.budget_usd, theme_budget_usd=self.theme_budget_usd, prices_file=self.prices,
            max_concurrency=self.max_concurrency, timeout=self.timeout,
        )

    def client(self, ledger=None):
        """A ready client, or a UserError explaining how to configure a provider."""
        from envforge.pipeline.llm.client import LLMClient

        return LLMClient(self.config(), ledger=ledger) if ledger is not None else LLMClient(self.config())


@dataclasses.dataclass(frozen=True)
class ExecutorOptions(Options):
    """Where a call's sandboxed work runs: this machine, or a Ray cluster's nodes."""

    SECTION = "executor"
    executor: str = option("local", one_of("local", "ray"), help="where sandboxed work runs: this machine (local, "
                           "default) or the nodes of a Ray cluster (ray; pip install 'envforge-rl[ray]'). Model calls "
                           "and records stay here")
    ray_address: str | None = option(None, metavar="ADDRESS", help="the Ray cluster to join (auto, HOST:PORT or "
                                     "ray://HOST:PORT; default $ENVFORGE_RAY_ADDRESS, else a new cluster on this "
                                     "machine)")

    def start(self):
        """The executor these options name (pipeline.sandbox.outside.executor.Executor), checked and ready:
        a Ray cluster is joined now, before the call writes anything."""
        from envforge.pipeline.sandbox.outside.executor import Executor

        if self.ray_address and self.executor != "ray":
            raise UserError(f"--ray-address {self.ray_address}: expected --executor ray with it, found --executor "
                            f"{self.executor}")
        return Executor(self.executor, self.ray_address if self.executor == "ray" else None).start()


def skin_option(then: str = "") -> Any:
    """The option `skin`: render observations through one of the environment's skins (evaluate, probe)."""
    return option(None, metavar="NAME", help="render observations with the environment's skins/NAME.py (written by "
                                             "envforge reskin, listed in its manifest)" + then)


@dataclasses.dataclass(frozen=True)
class ServeOptions(Options):
    """How `envforge serve` (pipeline/api/serve.py) bounds what clients may ask. Declared here, so that
    the command's flags need no OpenEnv (an optional extra) to be listed."""

    host: str = option("127.0.0.1", help="address to listen on (default {default}: this machine only; 0.0.0.0 "
                       "serves the network, with no authentication)")
    port: int = option(8000, whole(0, 65535), help="port (default {default}; 0: a free one, printed)")
    max_sessions: int = option(8, whole(1, 1024), help="sessions (sandbox workers) at once over all environments "
                               "(default {default})")
    idle_seconds: float = option(300.0, number(1.0, 86_400.0), help="close a session, and its worker, after this "
                                 "long without a message (default {default})")
    max_message_kb: int = option(64, whole(1, 16 * 1024), help="largest WebSocket message or request body in KiB "
                                 "(default {default})")
    request_seconds: float = option(10.0, number(1.0, 600.0), help="a client's request head, then its body, must "
                                    "each arrive within this long, or it gets 408 and is closed (slow clients; "
                                    "default {default})")
    max_connections: int | None = None  # open connections (sessions, health checks); None: connections()
    skin: str | None = option(None, help="serve this skin of the environments (see envforge reskin)")

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_kb * 1024

    def connections(self) -> int:
        """The open connections allowed: max_connections, else 4 a session and at least 16."""
        return self.max_connections or max(16, 4 * self.max_sessions)

    def connections_per_client(self) -> int:
        """The open connections one address may hold: half of connections(), at least 8 (a trainer on
        one machine holds its sessions and a few health checks; on loopback every client is one address)."""
        return max(8, self.connections() // 2)
