"""Sync forms of envforge's async calls that also work where an event loop already runs.

A notebook (Jupyter, IPython) runs its own event loop, so `asyncio.run()` refuses to start
there. `run_sync` runs the coroutine with `asyncio.run` when no loop is running, and otherwise
on a thread of its own with its own loop, waiting for it: the caller's loop is never re-entered.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, name="envforge-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
