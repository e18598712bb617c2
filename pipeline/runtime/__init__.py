"""The environment runtime: the contract generated environments fill in.

    from pipeline.runtime import SkinEnv        # write transition, reward, done, render_skin
    from pipeline.runtime import EventEnv       # or: rules(state, action) only; reward from the DSL
    from pipeline.runtime import read_move      # the grid actions move(direction) and wait, read once

Environment code says `pipeline.runtime`, in the sandbox worker only (compat/pipeline/ serves that
name); envforge's own code imports this package as envforge.pipeline.runtime.
"""
from envforge.pipeline.runtime.env import BaseEnv, EventEnv, ObsEnv, SkinEnv, event_rewards
from envforge.pipeline.runtime.levels import load_level, save_level, state_hash
from envforge.pipeline.runtime.moves import DIRECTIONS, read_move
from envforge.pipeline.runtime.observation import (
    EgocentricCrop,
    FullObservation,
    LineOfSight,
    ObservationPolicy,
    RadiusObservation,
    RandomMask,
    policy_from_config,
)

__all__ = [
    "BaseEnv",
    "ObsEnv",
    "SkinEnv",
    "EventEnv",
    "event_rewards",
    "ObservationPolicy",
    "FullObservation",
    "RadiusObservation",
    "EgocentricCrop",
    "LineOfSight",
    "RandomMask",
    "policy_from_config",
    "load_level",
    "save_level",
    "state_hash",
    "DIRECTIONS",
    "read_move",
]
