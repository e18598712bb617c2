"""Prompts are Jinja2 templates in templates/, rendered with StrictUndefined: a missing
variable is an error, never an empty string. Each is compiled once a process and never looked at
on disk again (no auto_reload: the package's templates do not change under a run, and an agent's
turn prompt is rendered every turn)."""
from __future__ import annotations

import functools
from typing import Any

import jinja2

from envforge.pipeline.paths import TEMPLATES_DIR


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,
    )


def render(name: str, **variables: Any) -> str:
    """Render templates/<name> (e.g. "generate/design.j2")."""
    return _environment().get_template(name).render(**variables)
