"""A user's own agent, `MODULE:ATTR` or `path/file.py:ATTR`, with the AutoEnv benchmark's
signature: `run(env, env_info)`, sync or async.

It runs **in envforge's process**, by the user's explicit choice (it is their code, not a
model's). The environment it gets is `EnvProxy`: AutoEnv's SkinEnv verbs (reset, step,
observe_semantic, render_skin, done) forwarded to the sandbox worker, so the environment's code
still runs only in the sandbox. The proxy counts every step with the same tracker as the
built-in agents, applies the same limits (after a stop, `step` reports done, and a further
`step` raises EpisodeOver), and the scores come from what the proxy saw, not from what `run`
returns. `run` is called on a thread of its own (an async `run` gets its own event loop there),
so a slow agent holds up only its own episode. That thread is a daemon: when the evaluation is
cancelled (Ctrl-C), the proxy refuses every further call (EpisodeOver) and envforge exits without
waiting for a `run` that never returns.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import sys
import threading
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.context import EpisodeContext
from envforge.pipeline.evaluate.episode import Decision, Tracker, Turn, trajectory_line
from envforge.pipeline.kinds import AgentReturned, TrajectoryLine
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient, Observation


class EpisodeOver(RuntimeError):
    """The agent stepped an episode that had already ended."""


def load_user_agent(spec: str) -> Callable[[], Any]:
    """A factory of fresh agent objects for `spec` (a class is instantiated once per episode;
    an object with `run` or a function `run(env, env_info)` is used as it is)."""
    source, sep, attr = spec.rpartition(":")
    if not sep or not source or not attr:
        raise UserError(f"--agent {spec}: expected react, tools, random, planner, MODULE:ATTR or path/file.py:ATTR")
    if source.endswith(".py") or "/" in source:
        path = Path(source).resolve()
        if not path.is_file():
            raise UserError(f"--agent {spec}: expected a Python file at {path}, found none")
        module_spec = importlib.util.spec_from_file_location(f"envforge_user_agent_{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        _importable(path.parent)
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - the user's module failed on import
            raise UserError(f"--agent {spec}: importing {path} failed: {type(e).__name__}: {e}") from None
    else:
        _importable(Path.cwd())
        try:
            module = importlib.import_module(source)
        except Exception as e:  # noqa: BLE001
            raise UserError(f"--agent {spec}: importing module {source!r} failed: {type(e).__name__}: {e}") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise UserError(f"--agent {spec}: expected {attr!r} in {source}, found no {part!r}")
        target = getattr(target, part)
    if inspect.isclass(target):
        if not callable(getattr(target, "run", None)):
            raise UserError(f"--agent {spec}: expected class {attr} to have a run(env, env_info) method")
        return target
    if callable(getattr(target, "run", None)):
        return lambda: target
    if callable(target):
        return lambda: SimpleNamespace(run=target)
    raise UserError(f"--agent {spec}: expected a class, an object with run(env, env_info) or a function, "
                    f"found {type(target).__name__}")


def _importable(folder: Path) -> None:
    """Let the agent import its sibling modules, after everything else: at the front of sys.path
    the folder would shadow envforge's own imports (a matplotlib.py beside the agent was imported
    by the report code)."""
    if str(folder) not in sys.path:
        sys.path.append(str(folder))


class EnvProxy:
    """The environment as a user's agent sees it; every call goes to the sandbox worker."""

    def __init__(self, ctx: EpisodeContext, env: EnvClient, tracker: Tracker, first: Observation,
                 log: Callable[[TrajectoryLine], None]):
        self.ctx, self._env, self._tracker, self._log = ctx, env, tracker, log
        self.configs = ctx.env.config  # data only, as AutoEnv agents read env.configs
        self.max_steps = ctx.max_steps
        self._observation, self._feedback, self._raw = first.observation, None, None
        self._done = False
        self.cancelled = False  # the evaluation was cancelled: every further call ends the agent's run

    def _live(self) -> None:
        if self.cancelled:
            raise EpisodeOver("the evaluation was interrupted")

    def reset(self, mode: str = "load", world_id: Any = None, seed: Any = None):
        """The episode's level is already loaded; reset only confirms it (one level, played once)."""
        self._live()
        level = Path(str(self.ctx.level))
        if self._tracker.env_steps:
            raise EpisodeOver("reset after stepping: an evaluation episode plays its level once")
        if mode != "load" or world_id not in (None, level.stem, level.name, str(self.ctx.level)):
            raise ValueError(f"this episode plays {level.stem}; found reset(mode={mode!r}, world_id={world_id!r})")
        return self._observation

    def observe_semantic(self) -> Any:
        self._live()
        self._raw = self._env.observe(want_obs=True).raw_obs
        return self._raw

    def render_skin(self, omega: Any = None) -> Any:
        return self._observation

    def done(self) -> bool:
        return self._done

    def step(self, action: Any):
        self._live()
        if self._done:
            raise EpisodeOver(f"the episode ended ({self._tracker.stop_reason}); no more steps")
        if not isinstance(action, dict):
            action = {"action": str(action), "params": {}}
        turn = Turn(self._tracker.turns + 1, self.max_steps, self._observation, self._feedback, [])
        decision = Decision(action=action)
        self._tracker.decided(decision)
        out = self._env.step(action, want_obs=True)
        out.state = None  # the true state stays hidden; raw_obs is what the observation policy shows
        self._tracker.stepped(action, out)
        self._observation, self._feedback = out.observation, out.last_action_result
        self._done = self._tracker.stop_reason is not None
        self._log(trajectory_line(turn, decision, out, self._tracker))
        info = {"skinned": out.observation, "raw_obs": out.raw_obs, "events": out.events,
                "last_action_result": out.last_action_result, "terminated": out.terminated,
                "truncated": out.truncated}
        return None, out.reward, self._done, info


async def _on_daemon_thread(fn: Callable[[], Any]) -> Any:
    """fn() on a daemon thread of its own, awaited: a cancelled await leaves the thread to end
    with the process instead of holding the process's exit until fn returns."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not outcome.done():
            outcome.set_exception(error) if error is not None else outcome.set_result(result)

    def target() -> None:
        try:
            result, error = fn(), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            result, error = None, e
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody awaits it any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="envforge-user-agent", daemon=True).start()
    return await outcome


def env_info(ctx: EpisodeContext) -> dict:
    return {"world_id": Path(str(ctx.level)).stem, "agent_instruction": ctx.env.instruction,
            "action_space": ctx.env.action_space, "max_step": ctx.max_steps, "env_name": ctx.env.name,
            "level": str(ctx.level), "run": ctx.run}


async def play_user_agent(make: Callable[[], Any], ctx: EpisodeContext, tracker: Tracker,
                          log: Callable[[TrajectoryLine], None]) -> Tracker:
    try:
        first = await ctx.session.reset(ctx.level)
    except SandboxFailure as f:
        tracker.stop("env_error", str(f))
        return tracker
    tracker.start(first)
    proxy = EnvProxy(ctx, ctx.session.env, tracker, first, log)

    def call() -> Any:
        result = make().run(proxy, env_info(ctx))
        if inspect.isawaitable(result):
            async def wait():
                return await result
            result = asyncio.run(wait())
        return result

    try:
        reported = await _on_daemon_thread(call)
        log(AgentReturned(reported))
    except asyncio.CancelledError:
        proxy.cancelled = True
        raise
    except EpisodeOver:
        pass  # the tracker already holds why it ended
    except SandboxFailure as f:
        tracker.stop("env_error", str(f))
    except Exception as e:  # noqa: BLE001 - the user's agent raised: its episode ends, the run goes on
        tail = "".join(traceback.format_exception(e)[-3:]).strip()
        tracker.stop("agent_error", f"{type(e).__name__}: {e}\n{tail}")
    if tracker.stop_reason is None:
        tracker.stop("agent_stopped", "run() returned before the episode ended")
    return tracker
