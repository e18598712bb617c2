"""What model-calling commands share once their flags are parsed: exit statuses, the cost
summary, and running work with a client.

    def run(args, options: GenerateOptions) -> int:   # the options parsed from the flags (_flags.command)
        return run_with_client(options.llm, "generate", lambda client: work(client), json=args.json)

`run_with_client` builds the client before any work (so a missing provider stops the command
with a `UserError` saying how to configure one), ends a run that hits a budget cap with exit
status 3 and a "budget exceeded" message, and always prints the cost summary at the end.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Awaitable, Callable

from envforge.pipeline.api.options import LLMOptions
from envforge.pipeline.errors import UserError
from envforge.pipeline.llm.client import LLMClient
from envforge.pipeline.llm.errors import BudgetExceeded, LLMError

EXIT_MODEL_FAILED = 1
EXIT_BUDGET_EXCEEDED = 3


def print_cost_summary(client: LLMClient, *, json: bool = False) -> None:
    """What the client's calls cost; with --json on stderr, as stdout carries only the JSON document."""
    print(client.ledger.summary(), file=sys.stderr if json else sys.stdout)


def run_with_client(llm: LLMOptions, command: str, work: Callable[[LLMClient], Awaitable[int]], *,
                    json: bool = False) -> int:
    """Run `await work(client)` and return its exit status; see the module docstring."""
    client = llm.client()

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
        # A command refused before any model call (bad input) has no cost to show: its one error
        # line is all it prints.
        spent = client.ledger.run
        if not (refused and spent.calls == 0 and spent.retries == 0 and spent.cost_usd == 0):
            print_cost_summary(client, json=json)
