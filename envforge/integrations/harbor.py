"""envforge environments as Harbor tasks (`envforge export harbor ENV_DIR… --out DIR`): one task folder
per level, its image playing the level in envforge's sandbox (pipeline/api/harbor.py, where the
task's layout is described). In a task's image, `envforge-play ACTION` plays one action and
tests/test.sh writes the episode's normalized reward where Harbor's verifier reads it (both run
`python -m envforge.pipeline.commands.harbor_task`)."""
from __future__ import annotations

from envforge.pipeline.api.harbor import HarborOptions, export_harbor, play, score

__all__ = ["HarborOptions", "export_harbor", "play", "score"]
