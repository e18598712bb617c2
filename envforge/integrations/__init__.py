"""envforge environments in other tools' shapes (each an optional extra).

- `envforge.integrations.openenv`: an OpenEnv HTTP/WebSocket server (`envforge serve`;
  pip install 'envforge-rl[openenv]'), the library's pipeline.api.serve.
- `envforge.integrations.verifiers`: a `verifiers` environment (`load_environment`, `envforge export
  verifiers`; pip install 'envforge-rl[verifiers]').

Every environment's code runs in envforge's sandbox workers; nothing here imports it.
"""
