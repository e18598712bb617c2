"""envforge environments in other tools' shapes (each an optional extra).

- `envforge.integrations.openenv`: an OpenEnv HTTP/WebSocket server (`envforge serve`;
  pip install 'envforge-rl[openenv]'), the library's pipeline.api.serve.
- `envforge.integrations.harbor`: Harbor task folders (`envforge export harbor`), and what plays and
  scores a task in its image (`envforge-play`, tests/test.sh).
- `envforge.integrations.trl`: TRL's GRPOTrainer `environment_factory` and dataset (TRLEnvironments).
- `envforge.integrations.verifiers`: verifiers 0.4's Taskset, Env and Harness, which the packages
  `envforge export verifiers` writes export (the `verifiers` extra).

Every environment's code runs in envforge's sandbox workers; nothing here imports it.
"""
