"""AutoEnv-format compatibility: `from base.env.base_observation import ObservationPolicy`."""
from envforge.pipeline.runtime.observation import ObservationPolicy

__all__ = ["ObservationPolicy"]
