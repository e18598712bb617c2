"""envforge environments as Harbor tasks (`envforge export harbor ENV_DIR… --out DIR`): one task folder
per level, its image playing the level in envforge's sandbox (pipeline/api/harbor.py, where the
task's layout is described). In a task's image, `python -m envforge.integrations.harbor play ACTION`
(what `envforge-play` runs) plays one action and `... score` (what tests/test.sh runs) writes the
episode's normalized reward where Harbor's verifier reads it."""
from __future__ import annotations

import sys

from envforge.pipeline.api.harbor import HarborOptions, export_harbor, main, play, score

__all__ = ["HarborOptions", "export_harbor", "main", "play", "score"]

if __name__ == "__main__":
    sys.exit(main())
