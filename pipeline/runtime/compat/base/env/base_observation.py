"""AutoEnv-format compatibility: `from base.env.base_observation import ObservationPolicy`."""
from pipeline.runtime.observation import ObservationPolicy

__all__ = ["ObservationPolicy"]
