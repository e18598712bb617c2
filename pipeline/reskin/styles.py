"""The skins written from a template, without a model: json, narrative and inverse.

A skin is a Python file `skins/<name>.py` in the env folder defining `render(omega, env) -> str`:
`omega` is the semantic observation (the ObsEnv layer's output), `env` the live environment, read
only (`env.base_render(omega)` is the env's own rendering, `env.max_steps`, `env._last_action_result`).
The sandbox worker loads it when asked (`Worker(env_dir, skin=name)`); its code runs there, like all
env code.

`inverse` follows the AutoEnv paper's Appendix E.3 ("Skin Inverse"): only the displayed symbols and
values change, the legend and instruction keep claiming the original meanings. What it inverts is
read off the environment's own observations (`inverse_parameters`) and written into the skin's
docstring: digits of drawn maps mirrored over the range they use (numeric label inversion), and the
two most frequent other tiles of drawn maps swapped (symbol inversion, e.g. wall <-> floor).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from envforge.pipeline.prompts import render as render_template

TEMPLATE_STYLES = ("json", "narrative", "inverse")
HINT_LINE = "Note: the environment may contain semantic inversions."


@dataclass(frozen=True)
class InverseParameters:
    grid_keys: list[str]  # omega fields that are drawn maps (lists of equal-length rows)
    digits: tuple[int, int] | None  # digits lo..hi shown as lo + hi - d
    swap: tuple[str, str] | None  # two tiles shown as each other


def template_source(style: str, env_name: str, skin_name: str, samples: list[dict] | None = None,
                    hint: bool = False) -> str:
    """The source of a template skin; `samples` (semantic observations) are needed for inverse."""
    if style == "inverse":
        p = inverse_parameters(samples or [])
        if not p.grid_keys:
            keys = sorted({k for omega in samples or [] for k in omega})
            raise ValueError("the inverse skin inverts drawn maps in the semantic observation (lists of "
                             f"equal-length strings), found none among its fields {keys}")
        if not (p.digits or p.swap):
            raise ValueError(f"the inverse skin found nothing to invert in the drawn maps {p.grid_keys}: "
                             "no digits and fewer than two kinds of tile")
        literals = {"grid_keys": repr(p.grid_keys), "digits": repr(p.digits), "swap": repr(p.swap),
                    "hint": repr(HINT_LINE) if hint else "None"}
        return render_template("skins/inverse.py.j2", env_name=env_name, skin_name=skin_name,
                               grid_keys=p.grid_keys, digits=p.digits,
                               swap=[repr(s) for s in p.swap] if p.swap else None,
                               hint=repr(HINT_LINE) if hint else None, literals=literals)
    if style in ("json", "narrative"):
        return render_template(f"skins/{style}.py.j2", env_name=env_name)
    raise ValueError(f"expected a template style ({', '.join(TEMPLATE_STYLES)}), found {style!r}")


def inverse_parameters(samples: list[dict]) -> InverseParameters:
    """What to invert, from semantic observations seen on the env's levels.

    Drawn maps are the fields that are, in every sample holding them, a list of two or more strings
    of one length. Their digits are mirrored over the range seen. Among the other characters, a
    marker (never more than once in a map, like the agent's '@') is left alone; the two most
    frequent remaining tiles are swapped (ties broken by the character, so the choice is repeatable).
    """
    maps: dict[str, list[list[str]]] = {}
    rejected: set[str] = set()
    for omega in samples:
        for key, value in omega.items():
            if _is_map(value):
                maps.setdefault(key, []).append(value)
            else:
                rejected.add(key)
    grid_keys = sorted(k for k in maps if k not in rejected)
    digits = [int(c) for k in grid_keys for rows in maps[k] for row in rows for c in row if c.isdigit()]
    counts: Counter = Counter()
    most_in_one_map: Counter = Counter()
    for k in grid_keys:
        for rows in maps[k]:
            here = Counter(c for row in rows for c in row if not c.isdigit() and not c.isspace())
            counts.update(here)
            for c, n in here.items():
                most_in_one_map[c] = max(most_in_one_map[c], n)
    tiles = sorted((c for c in counts if most_in_one_map[c] > 1), key=lambda c: (-counts[c], c))
    lo, hi = (min(digits), max(digits)) if digits else (0, 0)
    return InverseParameters(grid_keys, (lo, hi) if hi > lo else None,
                             (tiles[0], tiles[1]) if len(tiles) >= 2 else None)


def _is_map(value) -> bool:
    return (isinstance(value, list) and len(value) > 1 and all(isinstance(r, str) for r in value)
            and len({len(r) for r in value}) == 1 and len(value[0]) > 1)
