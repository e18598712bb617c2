"""A package's names imported on first use (PEP 562), so a command that needs one piece of a
package does not import the rest (the SDK clients behind pipeline.llm, the model agents behind
pipeline.evaluate)."""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` for `package`: `names` maps each exported name to the submodule
    defining it; the first use imports that submodule and keeps the value in the package."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
