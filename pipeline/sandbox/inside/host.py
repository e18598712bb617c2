"""Worker-side: holds one environment instance and answers the parent's requests.

Runs inside the sandbox, after confinement. Every reply is plain JSON; anything the
environment does wrong becomes a typed failure with the file and line in the env folder.
"""
from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from envforge.pipeline import layout
from envforge.pipeline.runtime import env as runtime_env
from envforge.pipeline.runtime.levels import level_text, state_hash
from envforge.pipeline.runtime.plain import NotPlainData, plain
from envforge.pipeline.sandbox.inside import adapters, faults, rngs, search, snapshots
from envforge.pipeline.sandbox.inside.faults import in_function, short, where, where_of
from envforge.pipeline.sandbox.protocol import ENV_OPS, Dispatcher, Failure

COMPAT_DIR = str(Path(runtime_env.__file__).resolve().parent / "compat")
DEFAULT_MAX_STEPS = 100  # a search's horizon when the host sent no cap


class EnvHost(Dispatcher):
    def __init__(self, env_dir: str):
        self.env_dir = Path(env_dir)
        faults.ROOT[0] = os.path.abspath(env_dir)
        self.env = None
        self.snapshots = snapshots.Snapshots(lambda: self.env)  # held by handle, and a search's own
        self.max_steps: int | None = None  # the episode's step cap, as the host sent it with reset

    # -- protocol (the dispatch itself is protocol.Dispatcher.handle) ---------------------
    OPS = ENV_OPS
    SUBJECT = "environment"
    TRACE_FRAMES = 8
    NOT_JSON = (NotPlainData,)

    def refused(self, op: str) -> str:
        return f"'{op}' before 'load'" if op != "load" and self.env is None else ""

    def result(self, value: Any) -> Any:
        return plain(value)

    def where(self) -> str:
        return where()

    def in_function(self) -> str:
        return in_function()

    # -- operations ------------------------------------------------------------------
    def op_load(self, env_id: Any = None, skin: str | None = None) -> dict:
        """Instantiate the env class of env_main.py; with `skin`, rendered by skins/<skin>.py."""
        sys.path[:0] = [str(self.env_dir), COMPAT_DIR]
        try:
            module = importlib.import_module(layout.ENV_MAIN.removesuffix(".py"))
            cls = find_env_class(module)
            if skin is not None:
                cls = _skinned(cls, skin, self.env_dir)
            self.env = _instantiate(cls, self.env_dir.name if env_id is None else env_id)
        except Failure as f:
            raise Failure("load", f.detail, f.where) from None
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, MemoryError):
                raise
            raise Failure("load", f"{type(e).__name__}: {e}", where()) from None
        return {"class": cls.__name__, **({"skin": skin} if skin else {})}

    def op_reset(self, level: str | None = None, seed: int | None = None, generate: bool = False,
                 want_state: bool = False, max_steps: int | None = None, want_obs: bool = False) -> dict:
        self.max_steps = max_steps
        rngs.seed_all(0 if seed is None else seed)  # envs that use the global RNGs become repeatable
        if generate:
            try:
                self.env.reset(mode="generate", seed=seed)
            except Exception:
                mismatch = adapters.generator_mismatch(seed, self.env)
                if mismatch is None:
                    raise
                raise Failure("exception", mismatch.detail, mismatch.where) from None
        else:
            self.env.reset(mode="load", world_id=self._world_id(level))
        result = self._observation(want_state, want_obs)
        if generate and want_state and isinstance(getattr(self.env, "_state", None), dict):
            try:  # the level file as written here, where its integer keys and tuples are still what they are
                result["level_text"] = level_text(self.env._state)
            except yaml.YAMLError:
                pass  # a state YAML cannot hold: the host keeps its plain JSON form
        return result

    def op_step(self, action: Any, want_state: bool = False, want_hash: bool = True, check_rng: bool = False,
                want_obs: bool = False) -> dict:
        if not isinstance(action, dict):
            action = {"action": str(action), "params": {}}
        before = (rngs.state(), rngs.own_states(self.env)) if check_rng else None
        out = self.env.step(action)
        if not isinstance(out, (tuple, list)) or len(out) != 4:
            raise Failure(
                "exception",
                f"step: expected (state, reward, done, info), found {short(out)}",
                where_of("step", self.env),
            )
        next_state, reward, done, info = out
        reward = _check_reward(reward, self.env)
        info = info if isinstance(info, dict) else {}
        capped = bool(done) and self._capped_only(next_state)
        result = {
            "reward": reward,
            "terminated": bool(done) and not capped,
            "capped": capped,  # done() said so only by its own copy of the step cap
            "observation": info.get("skinned"),
            "events": info.get("events") or [],
            "last_action_result": info.get("last_action_result"),
            "t": getattr(self.env, "_t", None),
            "state_hash": state_hash(getattr(self.env, "_state", None)) if want_hash else None,
        }
        if want_state:
            result["state"] = getattr(self.env, "_state", None)
        if want_state or want_obs:
            result["raw_obs"] = info.get("raw_obs")
        if before is not None:  # did this step draw random numbers (global RNGs, or ones the env holds)?
            result["rng_drawn"] = not rngs.same(before[0], rngs.state()) or before[1] != rngs.own_states(self.env)
        return result

    def op_observe(self, want_state: bool = False, want_obs: bool = False) -> dict:
        return self._observation(want_state, want_obs)

    def op_snapshot(self) -> dict:
        handle = self.snapshots.take()
        return {"handle": handle, "state_hash": state_hash(getattr(self.env, "_state", None))}

    def op_restore(self, handle: int, reseed: int | None = None) -> dict:
        """Restore a snapshot (see snapshots.Snapshots.restore for `reseed`)."""
        self.snapshots.restore(handle, reseed)
        return {"state_hash": state_hash(getattr(self.env, "_state", None))}

    def op_drop(self, handles: list[int] | None = None) -> dict:
        return {"held": self.snapshots.drop(handles)}

    def op_search(self, actions: list[dict], max_steps: int | None = None, max_nodes: int = 50_000,
                  seconds: float | None = None, time_in_key: bool = True, stop_at: float | None = None,
                  max_mb: float = 256.0, order: str = "breadth", bound: dict | None = None,
                  goals: list | None = None, floor: float | None = None) -> dict:
        """Search from the current state (see pipeline/sandbox/inside/search.py)."""
        horizon = int(max_steps or self.max_steps or DEFAULT_MAX_STEPS)
        try:
            return search.run(self, actions, horizon, max_nodes, seconds, time_in_key, stop_at, max_mb, order, bound,
                              goals, floor)
        finally:
            self.snapshots.release()

    def op_validate(self, level: str | None = None, state: dict | None = None) -> dict:
        """Run the env's validator (any shape pipeline/sandbox/inside/adapters.py accepts) on a level
        file, a given state, or the current state."""
        if level is not None:
            state = self._level_state(level)
        elif state is None:
            state = copy.deepcopy(getattr(self.env, "_state", None))
        try:
            validator = adapters.load_validator(getattr(self.env, "configs", None))
            ok, issues, warnings = validator.check(state, level)
            bound = validator.max_reward(state) if ok else None
        except adapters.AdapterError as e:
            raise Failure("interface", e.detail, e.where) from None
        if bound is not None:
            bound = _check_reward(bound, None, what="max_reward")
        return {"ok": ok, "issues": issues, "warnings": warnings, "max_reward": bound, "state_hash": state_hash(state)}

    def op_call(self, module: str, function: str, args: list | None = None, kwargs: dict | None = None) -> Any:
        """Call `function` ("name" or "Class.method") of one of the env's own modules."""
        if not (self.env_dir / f"{module}.py").is_file() or "." in module:
            raise Failure("usage", f"no module {module!r} in the environment folder")
        target = importlib.import_module(module)
        for i, part in enumerate(function.split(".")):
            target = getattr(target, part)
            if inspect.isclass(target) and i < len(function.split(".")) - 1:
                target = target()
        return target(*(args or []), **(kwargs or {}))

    def op_ping(self) -> dict:
        return {"pong": True}

    # -- helpers ---------------------------------------------------------------------
    def _capped_only(self, state: Any) -> bool:
        """Whether an episode the env says is done ended only by its own copy of the step cap
        (`self._t >= self.max_steps` in done()): that is the runtime's truncation, not an end
        state. Asked only at the cap, by asking done() again with the clock at zero."""
        t = getattr(self.env, "_t", None)
        if self.max_steps is None or not isinstance(t, int) or t < self.max_steps:
            return False
        try:
            self.env._t = 0
            return not self.env.done(state)
        except Exception:  # noqa: BLE001 - a done() that cannot say: leave its answer as it was
            return False
        finally:
            self.env._t = t

    def _observation(self, want_state: bool, want_obs: bool = False) -> dict:
        """The rendered observation; with `want_obs` the structured one it was rendered from too, and
        with `want_state` both and the true state (which a player that shows the observation does not
        need, and which costs its encoding, the pipe and the parent's checks of every value)."""
        omega = self.env.observe_semantic()
        result = {
            "observation": self.env.render_skin(omega),
            "t": getattr(self.env, "_t", None),
            "state_hash": state_hash(getattr(self.env, "_state", None)),
        }
        if want_state:
            result["state"] = getattr(self.env, "_state", None)
        if want_state or want_obs:
            result["raw_obs"] = omega
        return result

    def _world_id(self, level: str | None) -> str:
        """A world id the env's own loader finds (AutoEnv loaders only look in ./levels/)."""
        if level is None:
            raise Failure("usage", "reset needs a level or generate=True")
        path = self.env_dir / level
        if not path.is_file():
            raise Failure("usage", f"no level file {level!r}")
        if path.parent.name == layout.LEVELS:
            return path.stem
        alias = f"__{path.parent.name}__{path.stem}"
        shutil.copyfile(path, self.env_dir / layout.LEVELS / f"{alias}.yaml")
        return alias

    def _level_state(self, level: str) -> dict:
        from envforge.pipeline.runtime.levels import load_level

        path = self.env_dir / level
        if not path.is_file():
            raise Failure("usage", f"no level file {level!r}")
        return load_level(path)


def find_env_class(module) -> type:
    candidates = [
        obj for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, runtime_env.SkinEnv)
        and obj not in (runtime_env.SkinEnv, runtime_env.ObsEnv, runtime_env.BaseEnv)
        and not inspect.isabstract(obj)
    ]
    own = [c for c in candidates if c.__module__ == module.__name__]
    if not (own or candidates):
        raise Failure(
            "load", f"{layout.ENV_MAIN}: expected a concrete subclass of SkinEnv, found none", layout.ENV_MAIN
        )
    return (own or candidates)[-1]


def _skinned(cls: type, skin: str, env_dir: Path) -> type:
    """A subclass of the env class rendered by skins/<skin>.py's `render(omega, env)`.

    A skin replaces only `render_skin`; `env.base_render(omega)` still gives the env's own
    rendering. It stays a subclass in env_main's module, so the env finds its folder and
    config as before; whether the dynamics really stay the same is checked by
    pipeline.reskin.identity, not assumed.
    """
    rel = f"{layout.SKINS}/{skin}.py"
    path = env_dir / rel
    if not layout.SKIN_NAME.fullmatch(str(skin)) or not path.is_file():
        raise Failure("load", f"no skin {skin!r}: expected the file {rel}", rel)
    spec = importlib.util.spec_from_file_location(f"envforge_skin_{skin}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    render = getattr(module, "render", None)
    if not callable(render):
        raise Failure("load", f"{rel}: expected a function render(omega, env), found none", rel)
    return type(cls.__name__, (cls,), {
        "__module__": cls.__module__,
        "render_skin": lambda self, omega: render(omega, self),
        "base_render": lambda self, omega: cls.render_skin(self, omega),
    })


def _instantiate(cls: type, env_id: Any):
    """cls(env_id), or cls() when its constructor takes no argument (as its signature says: a
    TypeError its constructor raises is its own failure, whatever its message)."""
    try:
        inspect.signature(cls).bind(env_id)
    except TypeError:
        return cls()
    except ValueError:  # no signature to read (a class made in C): try it with the argument
        pass
    return cls(env_id)


def _check_reward(value: Any, env, what: str = "reward") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        where = where_of("reward", env) if env is not None else layout.ENV_VALIDATOR
        raise Failure("invalid_reward", f"{what}: expected a finite number, found {short(value)}", where)
    return float(value)

