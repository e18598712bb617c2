"""The environment runtime: the contract generated environments fill in.

    from pipeline.runtime import SkinEnv
"""
from pipeline.runtime.env import BaseEnv, ObsEnv, SkinEnv
from pipeline.runtime.levels import load_level, save_level, state_hash
from pipeline.runtime.observation import (
    EgocentricCrop,
    FullObservation,
    LineOfSight,
    ObservationPolicy,
    RadiusObservation,
    RandomMask,
    policy_from_config,
)

__all__ = [
    "BaseEnv", "ObsEnv", "SkinEnv", "ObservationPolicy", "FullObservation", "RadiusObservation",
    "EgocentricCrop", "LineOfSight", "RandomMask", "policy_from_config", "load_level",
    "save_level", "state_hash",
]
