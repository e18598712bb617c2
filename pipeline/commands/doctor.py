"""`envforge doctor [--model SPEC]`: what this machine and configuration can do.

Reports versions, what the sandbox can enforce here, which providers are configured, and with
`--model` (or `--provider`) makes one minimal call through the whole LLM stack, retries included.
Exit 0 when everything asked for works; 1 when the model call failed.
"""
from __future__ import annotations

import asyncio
import dataclasses
import platform
import sys
import time
from importlib import metadata

from envforge.pipeline import __version__
from envforge.pipeline.api.options import LLMOptions
from envforge.pipeline.commands._flags import command
from envforge.pipeline.commands._run import print_cost_summary
from envforge.pipeline.llm.client import LLMClient
from envforge.pipeline.llm.config import BASE_URL_VARS, KEY_VARS, environment
from envforge.pipeline.llm.errors import LLMError
from envforge.pipeline.llm.messages import Message

PACKAGES = ("anthropic", "openai", "tenacity", "PyYAML", "jsonschema", "Jinja2")
PROBE = "Reply with the single word: ok"


@command("doctor", LLMOptions, help="check versions, sandbox, providers, and (with --model) one model call",
         description=__doc__.split("\n\n")[0])
def run(args, options: LLMOptions) -> int:
    print(f"envforge {__version__}")
    print(f"python {platform.python_version()} ({sys.executable})")
    print("packages: " + ", ".join(f"{name} {_version(name)}" for name in PACKAGES))
    print("sandbox:")
    for line in sandbox_report():
        print(f"  {line}")
    print("providers:")
    for line in provider_report():
        print(f"  {line}")
    if not (options.model or options.provider):
        print("model check: skipped (pass --model SPEC to make one call)")
        return 0
    # no cache: a cached answer would prove nothing about the provider
    config = dataclasses.replace(options, no_cache=True).config()
    # A check should answer within a few attempts' time, not after the 15 minutes a run may
    # spend retrying one call: an unreachable host (no DNS, no route) is reported quickly.
    retry = dataclasses.replace(config.retry, max_elapsed=max(2 * config.timeout, 10.0))
    return asyncio.run(check_model(LLMClient(dataclasses.replace(config, retry=retry))))


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def sandbox_report() -> list[str]:
    """The confinement ladder (which rung workers get here, and why not the others), then what
    the chosen rung enforces, one mechanism a line."""
    try:
        from envforge.pipeline.sandbox.outside.capabilities import NONE, capabilities, enforcement, opted_in, runs_as
        caps = capabilities()
        mode = caps["mode"]
        rows = enforcement(mode)
    except Exception as exc:  # noqa: BLE001 - doctor reports every failure instead of crashing
        return [f"unknown ({type(exc).__name__}: {exc})"]
    if mode != NONE:
        lines = [f"confinement: {mode}, environment code as {runs_as(mode)}"]
    elif opted_in():
        lines = [f"confinement: none (--unconfined: environment code runs UNCONFINED, as {runs_as(mode)})"]
    else:
        lines = [f"confinement: none: environment code will not run here: {caps['reason']}"]
    lines.append("ladder (strongest first):")
    for rung in caps["ladder"]:
        state = "used" if rung.name == mode else "available" if rung.available else "not available"
        lines.append(f"  {rung.name}: {state} ({rung.detail})")
    # A mechanism the rung in use does not apply is "not enforced" (with why): "not available" is
    # the ladder's word for a rung this machine cannot give, and landlock may be both.
    return lines + [f"{name}: {'enforced' if on else 'not enforced'} ({detail})" for name, on, detail in rows]


def provider_report() -> list[str]:
    env = environment()
    lines = []
    for provider, key_var in KEY_VARS.items():
        base_url = env.get(BASE_URL_VARS[provider])
        where = f", base URL {base_url}" if base_url else ""
        if env.get(key_var):
            lines.append(f"{provider}: configured ({key_var} set{where})")
        elif provider == "openai" and base_url:
            lines.append(f"{provider}: configured (no key; OpenAI-compatible server at {base_url})")
        else:
            lines.append(f"{provider}: not configured (set {key_var})")
    lines.append("replay: available offline with --provider replay [--replay DIR] (default: the bundled demos)")
    return lines


async def check_model(client) -> int:
    where = f" at {client.config.base_url}" if client.config.base_url else ""
    print(f"model check: {client.spec}{where}")
    started = time.monotonic()
    try:
        async with client:
            response = await client.complete([Message.user(PROBE)], stage="doctor", max_tokens=16)
    except LLMError as exc:
        elapsed = time.monotonic() - started
        print(f"  FAILED after {elapsed:.2f} s: {exc}")
        print(f"envforge doctor: the model did not answer: {exc}", file=sys.stderr)
        print_cost_summary(client)
        return 1
    elapsed = time.monotonic() - started
    attempts = len(response.retries) + 1
    retried = f"; retried after: {', '.join(response.retries)}" if response.retries else ""
    print(f"  answered in {elapsed:.2f} s, {attempts} attempt(s), {len(response.retries)} retries{retried}")
    print(f"  reply: {response.text.strip()[:80]!r}")
    u = response.usage
    print(f"  tokens: {u.input_tokens} input, {u.output_tokens} output, "
          f"{u.cache_read_tokens} cache read, {u.cache_write_tokens} cache write")
    print(f"  cost: ${response.cost_usd:.6f}")
    print_cost_summary(client)
    return 0
