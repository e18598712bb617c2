"""AutoEnv-format compatibility: `from base.env.base_env import SkinEnv` resolves here.

The sandbox worker puts pipeline/runtime/compat on sys.path, so environments written for
the published AutoEnv code load unchanged on envforge's runtime.
"""
from envforge.pipeline.runtime.env import BaseEnv, ObsEnv, SkinEnv

__all__ = ["BaseEnv", "ObsEnv", "SkinEnv"]
