"""envforge environments as OpenEnv servers (`envforge serve`; pip install 'envforge-rl[openenv]'): the
public name of the library's server, pipeline.api.serve, which `envforge serve` calls too."""
from envforge.pipeline.api.serve import ServeOptions, build_app, serve

__all__ = ["ServeOptions", "build_app", "serve"]
