"""Worker-side: the global random number generators an environment may use (random's, and
numpy's when the environment imported numpy), seeded, captured and restored together.
Shared by the environment host (host.py) and its search (search.py)."""
from __future__ import annotations

import random
import sys


def _numpy_random():
    """numpy's global RNG module when the environment imported numpy (never imported here)."""
    numpy = sys.modules.get("numpy")
    return getattr(numpy, "random", None) if numpy is not None else None


def seed_all(seed: int) -> None:
    random.seed(seed)
    np_random = _numpy_random()
    if np_random is not None:
        np_random.seed(int(seed) % 2**32)


def state() -> tuple:
    """The global RNGs' state: `random`'s, and numpy's when the environment uses numpy."""
    np_random = _numpy_random()
    return random.getstate(), (np_random.get_state() if np_random is not None else None)


def set_state(state: tuple) -> None:
    random.setstate(state[0])
    np_random = _numpy_random()
    if np_random is not None and state[1] is not None:
        np_random.set_state(state[1])


def same(a: tuple, b: tuple) -> bool:
    if a[0] != b[0] or (a[1] is None) != (b[1] is None):
        return False
    if a[1] is None:
        return True
    return a[1][0] == b[1][0] and a[1][2:] == b[1][2:] and bytes(a[1][1].data) == bytes(b[1][1].data)


def key(state: tuple) -> int:
    """A hashable digest of a global-RNG state (for the search's merge key)."""
    numpy_part = None if state[1] is None else (state[1][2:], bytes(state[1][1].data))
    return hash((state[0], numpy_part))


def own_states(env) -> list:
    """The states of the random generators an environment holds as attributes (random.Random,
    numpy Generators and RandomStates), in attribute order, comparable with ==."""
    out = []
    for name, value in sorted(vars(env).items(), key=lambda kv: str(kv[0])):
        if isinstance(value, random.Random):
            out.append((name, value.getstate()))
        elif hasattr(value, "bit_generator"):
            out.append((name, repr(value.bit_generator.state)))
        elif type(value).__name__ == "RandomState" and hasattr(value, "get_state"):
            state = value.get_state()
            out.append((name, (state[0], bytes(state[1].data), state[2:])))
    return out
