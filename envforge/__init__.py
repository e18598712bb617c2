"""envforge from Python: open, play, evaluate and generate text environments.

    import envforge

    env = envforge.open("generated_envs/reference/crate_dock")      # the folder, read as data
    with env.session() as s:                                        # its code runs in a sandbox
        s.reset("level_01"); s.step("move north")
    result = envforge.evaluate(env.path, agent="planner", max_levels=2)
    result.overall["mean_normalized"], result.episodes[0].stop_reason
    gym_env = envforge.make(env.path)                               # pip install 'envforge-rl[gym]'

`envforge.check(path)` and `envforge.verify(path, stages=...)` test an environment folder as the
commands do; `envforge.probe(path, kind=...)` and `envforge.reskin(path, style=...)` derive from one. Every call
takes the command's flags as keywords, with the command's defaults.
Long-running calls (`evaluate`, `generate`) have async forms (`evaluate_async`, `generate_async`);
the sync forms also work inside a running event loop (Jupyter). Inspect AI tasks live in
`envforge.tasks` (pip install 'envforge-rl[inspect]'; `inspect eval envforge/env -T path=…`).

envforge is also the one import root of its parts: `envforge.pipeline` (the library, commands and
sandbox), `envforge.learning`, `envforge.dsl_schema`. Importing one of them, as the command line and
the sandbox worker do, loads nothing of the Python API: its names below are imported when first used.
"""
from __future__ import annotations

import importlib
from typing import Any

# name -> the module it comes from, imported on first use (PEP 562)
_LAZY = {
    **{name: "envforge.runs" for name in ("Generation", "check", "episodes", "evaluate", "evaluate_async",
                                          "generate", "generate_async", "probe", "reskin", "verify")},
    "run_sync": "envforge._loop",
    "__version__": "envforge.pipeline",
    "paths": "envforge.pipeline.paths",
    **{name: "envforge.pipeline.api.environment" for name in ("Environment", "Session", "Step", "open")},
    "UserError": "envforge.pipeline.errors",
    "EpisodeRecord": "envforge.pipeline.kinds",
    "SandboxFailure": "envforge.pipeline.sandbox",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'envforge' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    value = module if module.__name__.endswith(f".{name}") else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _gym_hint(name: str) -> str:
    from envforge.pipeline import install_hint

    return f"envforge.{name}: expected Gymnasium to be installed, found none: {install_hint('gym')}"


def _gym(name: str):
    try:
        from envforge import gym
    except ModuleNotFoundError as e:
        if e.name not in ("gymnasium", "numpy"):
            raise
        raise ModuleNotFoundError(_gym_hint(name), name=e.name) from None
    return getattr(gym, name)


def make(path, level: str | None = None, split: str = "test", skin: str | None = None, **kwargs: Any):
    """A `gymnasium.Env` for the environment folder at `path` (see envforge.gym.EnvforgeEnv)."""
    return _gym("make")(path, level=level, split=split, skin=skin, **kwargs)


def make_vec(path, num_envs: int, vectorization_mode: str = "sync", **kwargs: Any):
    """`num_envs` copies of `make(path, **kwargs)` as a Gymnasium vector environment."""
    return _gym("make_vec")(path, num_envs, vectorization_mode, **kwargs)


def register(root=None) -> list[str]:
    """Register the accepted environments under `root` (default: the default output folder of
    `envforge generate`) with Gymnasium as envforge/<name>-v0."""
    if root is None:
        from envforge.pipeline import paths

        root = paths.GENERATED_ENVS_DIR
    return _gym("register")(root)


__all__ = ["Environment", "EpisodeRecord", "Generation", "SandboxFailure", "Session", "Step", "UserError",
           "__version__", "check", "episodes", "evaluate", "evaluate_async", "generate", "generate_async", "make",
           "make_vec", "open", "probe", "register", "reskin", "run_sync", "verify"]
