"""envforge from Python: open, play, evaluate and generate text environments.

    import envforge

    env = envforge.open("generated_envs/reference/crate_dock")      # the folder, read as data
    with env.session() as s:                                        # its code runs in a sandbox
        s.reset("level_01"); s.step("move north")
    result = envforge.evaluate(env.path, agent="planner", max_levels=2)
    result.overall["mean_normalized"], result.episodes[0].stop_reason
    gym_env = envforge.make(env.path)                               # pip install 'envforge[gym]'

`envforge.check(path)` and `envforge.verify(path, stages=...)` test an environment folder as the
commands do; `envforge.probe(path, kind=...)` and `envforge.reskin(path, style=...)` derive from one. Every call
takes the command's flags as keywords, with the command's defaults.
Long-running calls (`evaluate`, `generate`) have async forms (`evaluate_async`, `generate_async`);
the sync forms also work inside a running event loop (Jupyter). Inspect AI tasks live in
`envforge.tasks` (pip install 'envforge[inspect]'; `inspect eval envforge/env -T path=…`).
"""
from __future__ import annotations

from typing import Any

from envforge._loop import run_sync
from envforge.runs import (
    Generation,
    check,
    episodes,
    evaluate,
    evaluate_async,
    generate,
    generate_async,
    probe,
    reskin,
    verify,
)
from pipeline import __version__, paths
from pipeline.api.environment import Environment, Session, Step, open
from pipeline.errors import UserError
from pipeline.kinds import EpisodeRecord
from pipeline.sandbox import SandboxFailure

_GYM_HINT = "envforge.{}: expected Gymnasium to be installed, found none: pip install 'envforge[gym]'"


def _gym(name: str):
    try:
        from envforge import gym
    except ModuleNotFoundError as e:
        if e.name not in ("gymnasium", "numpy"):
            raise
        raise ModuleNotFoundError(_GYM_HINT.format(name), name=e.name) from None
    return getattr(gym, name)


def make(path, level: str | None = None, split: str = "test", skin: str | None = None, **kwargs: Any):
    """A `gymnasium.Env` for the environment folder at `path` (see envforge.gym.EnvforgeEnv)."""
    return _gym("make")(path, level=level, split=split, skin=skin, **kwargs)


def make_vec(path, num_envs: int, vectorization_mode: str = "sync", **kwargs: Any):
    """`num_envs` copies of `make(path, **kwargs)` as a Gymnasium vector environment."""
    return _gym("make_vec")(path, num_envs, vectorization_mode, **kwargs)


def register(root=paths.GENERATED_ENVS_DIR) -> list[str]:
    """Register the accepted environments under `root` with Gymnasium as envforge/<name>-v0."""
    return _gym("register")(root)


__all__ = ["Environment", "EpisodeRecord", "Generation", "SandboxFailure", "Session", "Step", "UserError",
           "__version__", "check", "episodes", "evaluate", "evaluate_async", "generate", "generate_async", "make",
           "make_vec", "open", "probe", "register", "reskin", "run_sync", "verify"]
