"""Worker-side: the snapshots a worker holds of its environment (`Snapshots`: by handle for the
parent's snapshot/restore/drop, and the ones a search takes), sharing what has not changed (`Store`).

A snapshot is the environment's own attributes and the global RNGs' state.
A search restores a snapshot before every step it takes (pipeline/sandbox/inside/search.py), so
restoring must be cheap. Environments often keep an append-only list of past states (a
`_history` of deep copies, one more per step): a snapshot taken at step 30 holds 30 old states,
and unpickling them all again on every restore is most of a search's time (1_InterDimension).

So the items of the environment's top-level lists (dicts and lists: past states, log entries)
are *shared*: the first snapshot that holds one registers it, every later snapshot names it by
a persistent id in its pickle instead of copying it, and a restore hands the environment the
same object again, with a new list around it (appending to the list touches no snapshot).
Sharing is only sound while nothing changes a shared object and nothing else points into one:

  * Before every restore and capture, each shared object the environment was handed (or whose
    original it still holds) is compared (`==`) with a private copy made when it was registered.
    When one differs, the environment changed it in place: sharing stops for this store, every
    later capture is a full pickle and every later restore gets fresh copies of the private
    copies (the snapshots naming a shared object restore what it held when they were taken).
    A value changed to an equal one of another type (1 to 1.0) is not seen; everything else is.
  * A capture whose attributes point into a shared object from outside it (`self._last =
    self._history[-1]["agent"]`, or a shallow copy whose dicts a state still holds) is taken as
    a full pickle instead, and sharing stops: a restore would otherwise part what the
    environment holds as one object.
  * Only plain data is shared (dicts, lists, tuples, sets and scalars: no objects with an
    `__eq__` of their own). The private copy holds the same scalars (immutable) in new
    containers, so the comparison meets each scalar as itself and is quick, and a NaN replaced
    by another NaN is seen.

The static attributes (_STATIC_ATTRS: the parsed config.yaml, the observation policy) are never
copied: a snapshot leaves them out, and where another attribute holds one of them (a level
generator built with the config: 1_InterDimension's `generator` holds `configs`, three quarters
of each of its snapshots' bytes) the pickle names it by a persistent id, and a restore hands back
the object itself, as the environment held it (one object, not a copy beside it).

Without any of that (no top-level lists, unpicklable attributes) a snapshot is what it was: the
attributes' pickle, or their deep copy when they cannot be pickled.
"""
from __future__ import annotations

import copy
import io
import pickle
import random
import sys
from typing import Any, Callable

from envforge.pipeline.sandbox.inside import rngs
from envforge.pipeline.sandbox.protocol import Failure

MAX_SNAPSHOTS = 200_000  # snapshots held by handle at once
# Instance attributes shared by every snapshot instead of copied.
_STATIC_ATTRS = {"configs", "obs_policy"}
# Objects (containers and scalars) in shared items at most: past it nothing new is shared.
MAX_SHARED = 500_000
MAX_INNER = 4096  # containers inside one shared object (their identities are watched for aliases)


class Snapshots:
    """The snapshots of the environment `env()` returns: the ones held by handle (the parent's
    snapshot, restore and drop) and the ones a search takes and applies (capture, apply)."""

    def __init__(self, env: Callable[[], Any]):
        self.env = env
        self.held: dict[int, tuple] = {}
        self.store = Store()  # what snapshots share (held while any snapshot may name it)
        self.next_handle = 0

    def take(self) -> int:
        """Hold a snapshot of the environment now; its handle."""
        if len(self.held) >= MAX_SNAPSHOTS:
            raise Failure("usage", f"more than {MAX_SNAPSHOTS} snapshots held; drop some")
        handle = self.next_handle
        self.next_handle += 1
        self.held[handle] = self.capture()
        return handle

    def restore(self, handle: int, reseed: int | None = None) -> None:
        """Back to a held snapshot. With `reseed`, then reseed the global RNG and any random.Random
        the env holds, so one state can be continued along other random paths (a stochastic env's
        possible next observations, as derived prediction tests sample them)."""
        if handle not in self.held:
            raise Failure("usage", f"no snapshot {handle}")
        self.apply(self.held[handle])
        if reseed is not None:
            rngs.seed_all(reseed)
            for value in vars(self.env()).values():
                if isinstance(value, random.Random):
                    value.seed(reseed)

    def drop(self, handles: list[int] | None = None) -> int:
        """Forget the snapshots `handles` (all of them: None); how many are still held."""
        if handles is None:
            self.held.clear()
        for h in handles or []:
            self.held.pop(h, None)
        self.release()
        return len(self.held)

    def release(self) -> None:
        """Forget what snapshots shared once none is held (a search's own are gone when it returns)."""
        if not self.held:
            self.store.clear()

    def capture(self, like: tuple | None = None) -> tuple:
        """A snapshot: a copy of the env's own attributes and the global RNG state.

        Pickled when the attributes allow it (several times faster than deepcopy for plain
        data, and compact, which the search's frontier needs), past states and other items of
        the env's lists shared between snapshots (Store); deep-copied otherwise. An RNG state
        equal to the one in `like` is shared, not held twice (it is ~20 KB).
        """
        env = vars(self.env())
        attrs = {k: v for k, v in env.items() if k not in _STATIC_ATTRS}
        self.store.pin(v for k, v in env.items() if k in _STATIC_ATTRS)
        rng = rngs.state()
        if like is not None and rngs.same(rng, like[1]):
            rng = like[1]
        try:
            return self.store.dumps(attrs), rng
        except Exception:  # noqa: BLE001 - unpicklable attributes (lambdas, handles): deepcopy them
            self.store.stop("the environment's attributes cannot be pickled")
            return copy.deepcopy(attrs), rng

    def apply(self, snapshot: tuple, rng: bool = True) -> None:
        """Back to a snapshot; `rng=False` when the global RNGs already hold its state (the search knows)."""
        attrs, state = snapshot
        vars(self.env()).update(self.store.loads(attrs) if isinstance(attrs, bytes) else self.store.copied(attrs))
        if rng:
            rngs.set_state(state)


class Aliased(Exception):
    """A capture's attributes point into a shared object from outside it."""


class Store:
    """The shared objects of one worker's snapshots (see the module docstring)."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.shared: dict[int, object] = {}  # persistent id -> the object every snapshot naming it gets
        self.pristine: dict[int, object] = {}  # persistent id -> a private copy to check it against
        self.ids: dict[int, int] = {}  # id(shared object) -> its persistent id
        self.refused: dict[int, object] = {}  # id -> an item that cannot be shared (held, so its id stays its own)
        self.inner: dict[int, int] = {}  # id(a container inside a shared object) -> that object's persistent id
        self.live: set[int] = set()  # shared objects the environment may hold now
        self.held = 0  # objects in the shared items (and items refused)
        self.sharing = True  # off after a mutation or an alias was seen: full pickles from then on
        self.named = False  # some pickle names a shared object (else plain pickle.loads reads them all)
        self.stopped = ""  # why sharing stopped
        self.static: dict[int, object] = {}  # id -> a static attribute's object (held: its id stays its own)

    # -- capture and restore -----------------------------------------------------------
    def pin(self, objects) -> None:
        """The static attributes' objects: named by persistent id wherever an attribute holds one."""
        for obj in objects:
            if type(obj) not in _SCALARS:
                self.static.setdefault(id(obj), obj)

    def dumps(self, attrs: dict) -> bytes:
        """The attributes' pickle, naming shared objects by persistent id. Raises what pickle raises."""
        self.check()
        if self.sharing:
            for value in attrs.values():
                if type(value) is list:
                    for item in value:
                        if (type(item) in (dict, list) and id(item) not in self.ids and id(item) not in self.refused
                                and self.held < MAX_SHARED):
                            self._register(item)
        if self.sharing:
            buffer = io.BytesIO()
            try:
                _Pickler(buffer, self).dump(attrs)
                return buffer.getvalue()
            except Aliased as alias:
                self.stop(str(alias))
        if self.static:  # sharing stopped: the static objects are still named, not copied
            buffer = io.BytesIO()
            _Pickler(buffer, self).dump(attrs)
            return buffer.getvalue()
        return pickle.dumps(attrs, pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> dict:
        """The attributes of a pickle from `dumps`: shared objects as themselves while sharing
        lasts, fresh copies of them after it stopped."""
        self.check()
        self.live = set()
        if not self.named:  # as quick as before when nothing is shared (an env without such lists)
            return pickle.loads(data)
        return _Unpickler(io.BytesIO(data), self).load()

    def copied(self, attrs: dict) -> dict:
        """A deep copy of attributes that could not be pickled (they name no shared object)."""
        self.check()
        self.live = set()
        return copy.deepcopy(attrs)

    def check(self) -> None:
        """Every shared object the environment may hold still equals its private copy; when one
        does not, sharing stops and the snapshots naming it get copies of the private one."""
        for pid in self.live:
            if not _equal(self.shared[pid], self.pristine[pid]):
                self.stop(f"the environment changed a shared object in place (id {pid})")
        if not self.sharing:
            self.live = set()

    def handed(self, pid: int):
        """What a restore gives the environment for persistent id `pid`."""
        if self.sharing:
            self.live.add(pid)
            return self.shared[pid]
        return pickle.loads(pickle.dumps(self.pristine[pid], pickle.HIGHEST_PROTOCOL))

    # -- helpers -----------------------------------------------------------------------
    def _register(self, item) -> None:
        copied = _rebuild(item)
        # Not plain data or too many containers to watch for aliases: a change could go unseen.
        if copied is None or not _equal(item, copied[0]):
            self.refused[id(item)] = item
            self.held += 1
            return
        pristine, inner, size = copied
        pid = len(self.pristine)
        self.shared[pid], self.pristine[pid], self.ids[id(item)] = item, pristine, pid
        for key in inner:
            self.inner[key] = pid
        self.held += size
        self.live.add(pid)

    def stop(self, why: str) -> None:
        if self.sharing:
            self.sharing, self.stopped = False, why


_SCALARS = {str, int, float, complex, bool, type(None), bytes}
_CONTAINERS = {dict: dict, list: list, tuple: tuple, set: set, frozenset: frozenset}


def _scalar(kind: type) -> bool:
    """Whether values of `kind` are immutable scalars compared by value: Python's, or numpy's
    numbers (np.float64 and the like, which environments using numpy store in their states)."""
    if kind in _SCALARS:
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and issubclass(kind, (numpy.floating, numpy.integer, numpy.bool_)):
        _SCALARS.add(kind)
        return True
    return False


def _rebuild(item) -> tuple[object, list[int], int] | None:
    """A private copy of a plain-data item: new containers around the same scalars (immutable,
    so comparing the two with `==` meets each scalar as itself and is quick), the ids of the
    mutable containers inside it (not itself: a capture checks them for aliases), and how many
    objects it holds. None when it holds anything but dicts, lists, tuples, sets and scalars
    (an object's own __eq__ could hide a change), or more than MAX_INNER containers."""
    inner: list[int] = []
    count = [0]

    def copy_of(value, top: bool):
        kind = type(value)
        count[0] += 1
        if kind in _SCALARS or _scalar(kind):
            return value
        make = _CONTAINERS.get(kind)
        if make is None or len(inner) >= MAX_INNER:
            raise _NotPlain
        if not top and kind in (dict, list, set):
            inner.append(id(value))
        if kind is dict:
            return {copy_of(k, False): copy_of(v, False) for k, v in value.items()}
        return make(copy_of(v, False) for v in value)

    try:
        return copy_of(item, True), inner, count[0]
    except (_NotPlain, RecursionError):
        return None


class _NotPlain(Exception):
    pass


class _Pickler(pickle.Pickler):
    def __init__(self, file, store: Store):
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.store, self.ids, self.inner, self.static = store, store.ids, store.inner, store.static

    def persistent_id(self, obj):
        key = id(obj)
        if key in self.static:
            self.store.named = True
            return ("static", key)
        if not self.store.sharing:
            return None
        pid = self.ids.get(key)
        if pid is None:
            if key in self.inner:
                raise Aliased(f"an attribute points into a shared object (id {self.inner[key]})")
        else:
            self.store.named = True
        return pid


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, store: Store):
        super().__init__(file)
        self.store = store

    def persistent_load(self, pid):
        if isinstance(pid, tuple):  # ("static", id): the static attribute's object itself
            return self.store.static[pid[1]]
        return self.store.handed(pid)


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - env values that cannot say: not equal
        return False
