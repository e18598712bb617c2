"""Resolving what the user gave (flags, environment variables, a `.env` file) into one
`LLMConfig`, or a `UserError` that says how to configure a provider.

Precedence, highest first: command-line flags, the process environment, `.env` in the
current directory (or the file named by ENVFORGE_DOTENV), built-in defaults.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from envforge.pipeline import paths
from envforge.pipeline.errors import UserError, not_a_folder
from envforge.pipeline.llm.retry import RetryPolicy

PROVIDERS = ("anthropic", "openai", "replay")
BUNDLED_REPLAY_DIR = paths.BUNDLED_REPLAY_DIR
# Defaults are models with a known price, so that budgets hold without a --prices file.
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-mini", "replay": "replay"}
KEY_VARS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_URL_VARS = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
# Local OpenAI-compatible servers (Ollama, llama.cpp, vLLM) ignore the key, but the SDK wants one.
LOCAL_SERVER_KEY = "not-needed"

HOW_TO_CONFIGURE = """no model provider is configured. Choose one of:
  - Anthropic: export ANTHROPIC_API_KEY=sk-ant-...   (optionally --model anthropic/<model>)
  - OpenAI:    export OPENAI_API_KEY=sk-...           (optionally --model openai/<model>)
  - any OpenAI-compatible server (vLLM, Ollama, llama.cpp, OpenRouter):
               export OPENAI_BASE_URL=http://localhost:11434/v1 and --model openai/<model>
               (or --base-url URL; OPENAI_API_KEY if the server wants one)
  - offline, no key: --provider replay [--replay DIR]   (recorded responses; default: the bundled examples/replay)
The variables may also be put in a .env file in the current directory."""


def default_cache_path(env: Mapping[str, str]) -> Path:
    if env.get("ENVFORGE_CACHE"):
        return Path(env["ENVFORGE_CACHE"])
    root = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "envforge" / "responses.sqlite"


@dataclass(frozen=True)
class Budget:
    """What the ledger (pipeline.llm.ledger.Ledger) holds a client's model calls to: the run's and each
    theme's cap in dollars (None: no cap), priced by `prices_file` (None: the shipped price table)."""
    run_usd: float | None = None
    theme_usd: float | None = None
    prices_file: Path | None = None


@dataclass(frozen=True)
class LLMConfig:
    provider: str
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_source: str = ""
    timeout: float = 300.0
    max_concurrency: int = 8
    replay_dir: Path | None = None
    record_dir: Path | None = None
    cache_path: Path | None = None
    budget: Budget = Budget()
    retry: RetryPolicy = RetryPolicy()

    @property
    def spec(self) -> str:
        return f"{self.provider}/{self.model}"


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; `export ` prefixes, quotes, blank lines and # comments allowed."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise UserError(f"{path}:{number}: expected KEY=VALUE, found {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment layered over `.env`."""
    env = dict(os.environ if environ is None else environ)
    dotenv = Path(env.get("ENVFORGE_DOTENV") or ".env")
    return {**read_dotenv(dotenv), **env}


def split_spec(spec: str, provider: str | None) -> tuple[str | None, str]:
    """`anthropic/claude-x` -> ("anthropic", "claude-x"). With an explicit provider the spec is
    a model name unless it starts with that provider (OpenRouter names contain slashes)."""
    head, sep, rest = spec.partition("/")
    if provider:
        return provider, rest if sep and head == provider else spec
    if sep and head in PROVIDERS:
        return head, rest
    return None, spec


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(env[name]) if env.get(name) else default
    except ValueError as exc:
        raise UserError(f"environment variable {name}: expected a number, found {env[name]!r}") from exc


def resolve(
    *, model: str | None = None, provider: str | None = None, base_url: str | None = None,
    api_key_env: str | None = None, replay_dir: str | None = None, record_dir: str | None = None,
    cache_path: str | None = None, no_cache: bool = False, run_budget_usd: float | None = None,
    theme_budget_usd: float | None = None, prices_file: str | None = None,
    max_concurrency: int | None = None, timeout: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> LLMConfig:
    env = environment(environ)
    if provider is not None and provider not in PROVIDERS:
        raise UserError(f"--provider: expected one of {', '.join(PROVIDERS)}, found {provider!r}")
    spec = model or env.get("ENVFORGE_MODEL") or ""
    provider, name = split_spec(spec, provider)
    if provider is None and replay_dir:
        provider = "replay"
    if provider is None:
        if env.get("ANTHROPIC_API_KEY"):
            provider = "anthropic"
        elif env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
            provider = "openai"
        elif "/" in spec:
            raise UserError(f"--model {spec}: expected {', '.join(p + '/<model>' for p in PROVIDERS)}, found "
                            f"provider {spec.partition('/')[0]!r} (for a model name with a slash, e.g. an "
                            f"OpenRouter model, add --provider openai)")
        else:
            raise UserError(HOW_TO_CONFIGURE)
    base_url = base_url or env.get(BASE_URL_VARS.get(provider, "")) or None
    if not name:
        if provider == "openai" and base_url:
            raise UserError(f"name the model served at {base_url} with --model openai/<model>")
        name = DEFAULT_MODELS[provider]

    api_key, key_source = None, ""
    if provider in KEY_VARS:
        key_var = api_key_env or KEY_VARS[provider]
        api_key, key_source = env.get(key_var) or None, key_var
        if api_key is None and provider == "openai" and base_url:
            api_key, key_source = LOCAL_SERVER_KEY, "none (local server)"
        if api_key is None:
            raise UserError(f"provider {provider} needs an API key in the environment variable {key_var} "
                            f"(or in .env); none is set.\n\n{HOW_TO_CONFIGURE}")

    if provider == "replay":
        # Without --replay, the recordings bundled with envforge: the offline demos.
        replay_dir = replay_dir or str(BUNDLED_REPLAY_DIR)
        if not Path(replay_dir).is_dir():
            raise UserError(f"--replay {replay_dir}: expected a folder of recordings, found {not_a_folder(replay_dir)}")
    if record_dir and replay_dir and Path(record_dir).resolve() == Path(replay_dir).resolve():
        raise UserError("--record and --replay name the same folder; recording would overwrite what is replayed")

    retry = RetryPolicy(
        max_attempts=int(_env_float(env, "ENVFORGE_RETRY_MAX_ATTEMPTS", RetryPolicy.max_attempts)),
        base_delay=_env_float(env, "ENVFORGE_RETRY_BASE_DELAY", RetryPolicy.base_delay),
        max_delay=_env_float(env, "ENVFORGE_RETRY_MAX_DELAY", RetryPolicy.max_delay),
    )
    for flag, value in (("--budget-usd", run_budget_usd), ("--theme-budget-usd", theme_budget_usd)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise UserError(f"{flag}: expected a finite, non-negative amount of dollars, found {value!r}")
    if max_concurrency is not None and max_concurrency < 1:
        raise UserError(f"--max-concurrency: expected at least 1, found {max_concurrency}")
    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout: expected a positive number of seconds, found {timeout}")
    prices = prices_file or env.get("ENVFORGE_PRICES")
    if prices and not Path(prices).is_file():
        raise UserError(f"--prices {prices}: no such file")

    return LLMConfig(
        provider=provider, model=name, base_url=base_url, api_key=api_key, api_key_source=key_source,
        timeout=timeout or _env_float(env, "ENVFORGE_TIMEOUT", LLMConfig.timeout),
        max_concurrency=max_concurrency or LLMConfig.max_concurrency,
        replay_dir=Path(replay_dir) if replay_dir else None,
        record_dir=Path(record_dir) if record_dir else None,
        cache_path=None if no_cache or provider == "replay" else Path(cache_path or default_cache_path(env)),
        budget=Budget(run_budget_usd, theme_budget_usd, Path(prices) if prices else None), retry=retry,
    )
