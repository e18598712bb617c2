"""The flags every model-calling command shares, and turning them into a client.

    def register(subparsers):
        parser = subparsers.add_parser("generate", ...)
        add_llm_arguments(parser)
        parser.set_defaults(func=run)

    def run(args) -> int:
        return run_with_client(args, generate)   # async def generate(client) -> int

`run_with_client` builds the client before any work (so a missing provider stops the command
with a `UserError` saying how to configure one), ends a run that hits a budget cap with exit
status 3 and a "budget exceeded" message, and always prints the cost summary at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Awaitable, Callable

from pipeline.llm.client import LLMClient
from pipeline.llm.config import PROVIDERS, LLMConfig, resolve
from pipeline.llm.errors import BudgetExceeded, LLMError
from pipeline.argtypes import COUNT, SECONDS, USD, out_dir
from pipeline.errors import UserError

EXIT_MODEL_FAILED = 1
EXIT_BUDGET_EXCEEDED = 3


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model provider")
    g.add_argument("--model", metavar="SPEC",
                   help="anthropic/<model> or openai/<model> (default: $ENVFORGE_MODEL, else from the keys set)")
    g.add_argument("--provider", choices=PROVIDERS, help="provider, if SPEC does not name one")
    g.add_argument("--base-url", metavar="URL",
                   help="API base URL, e.g. an OpenAI-compatible server (default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)")
    g.add_argument("--api-key-env", metavar="VAR",
                   help="read the API key from this environment variable instead of the provider's usual one")
    g.add_argument("--replay", metavar="DIR", help="serve recorded responses from DIR (with --provider replay)")
    g.add_argument("--record", type=out_dir, metavar="DIR", help="write every call and its response to DIR")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the response cache")
    g.add_argument("--cache", metavar="PATH",
                   help="response cache file (default: $ENVFORGE_CACHE or ~/.cache/envforge/responses.sqlite)")
    g.add_argument("--budget-usd", type=USD, metavar="USD", help="stop before the run spends more than USD")
    g.add_argument("--theme-budget-usd", type=USD, metavar="USD", help="stop a theme before it spends more than USD")
    g.add_argument("--prices", metavar="FILE", help="price table overriding the shipped one (same YAML format)")
    g.add_argument("--max-concurrency", type=COUNT, metavar="N", help="model calls in flight at once (default 8)")
    g.add_argument("--timeout", type=SECONDS, metavar="SECONDS", help="limit for one call attempt (default 300)")


def config_from_args(args: argparse.Namespace) -> LLMConfig:
    return resolve(
        model=args.model, provider=args.provider, base_url=args.base_url, api_key_env=args.api_key_env,
        replay_dir=args.replay, record_dir=args.record, cache_path=args.cache, no_cache=args.no_cache,
        run_budget_usd=args.budget_usd, theme_budget_usd=args.theme_budget_usd, prices_file=args.prices,
        max_concurrency=args.max_concurrency, timeout=args.timeout,
    )


def client_from_args(args: argparse.Namespace) -> LLMClient:
    """A ready client, or `UserError` explaining how to configure a provider."""
    return LLMClient(config_from_args(args))


def print_cost_summary(client: LLMClient, file=None) -> None:
    print(client.ledger.summary(), file=file or sys.stdout)


def run_with_client(args: argparse.Namespace, work: Callable[[LLMClient], Awaitable[int]]) -> int:
    """Run `await work(client)` and return its exit status; see the module docstring."""
    client = client_from_args(args)
    command = getattr(args, "command", None) or "envforge"

    async def main() -> int:
        async with client:
            return await work(client)

    refused = False
    try:
        return asyncio.run(main())
    except UserError:
        refused = True
        raise
    except BudgetExceeded as exc:
        print(f"envforge {command}: {exc}", file=sys.stderr)
        return EXIT_BUDGET_EXCEEDED
    except LLMError as exc:
        print(f"envforge {command}: model call failed: {exc}", file=sys.stderr)
        return EXIT_MODEL_FAILED
    finally:
        # With --json, stdout carries only the JSON document. A command refused before any model
        # call (bad input) has no cost to show: its one error line is all it prints.
        spent = client.ledger.run
        if not (refused and spent.calls == 0 and spent.retries == 0 and spent.cost_usd == 0):
            print_cost_summary(client, file=sys.stderr if getattr(args, "json", False) else sys.stdout)
