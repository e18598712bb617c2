"""envforge environments as OpenEnv servers (`envforge serve`; pip install 'envforge-rl[openenv]').

    envforge serve generated_envs/reference/crate_dock --port 8000

    from openenv.core import GenericEnvClient
    with GenericEnvClient(base_url="http://127.0.0.1:8000/crate_dock").sync() as env:
        result = env.reset(level="level_01")            # or seed=7: the level the generator makes
        while not result.done:
            result = env.step({"action": "move", "params": {"direction": "north"}})
            # or {"text": "move north"}: an action as `envforge play` reads it
        result.metadata["normalized"], result.metadata["terminated"], result.metadata["truncated"]

Each environment is served at /NAME (and at / when only one is served) in OpenEnv's shape: a
WebSocket session at /NAME/ws (what OpenEnv's client speaks: reset, step, state, close messages),
/NAME/schema (the typed action, observation and state models, derived from the action space),
/NAME/health, /NAME/metadata, /NAME/openapi.json (this environment's routes) and /NAME/mcp (JSON-RPC:
it answers that no MCP tools are served, episodes are played in sessions), which is what `openenv
validate` checks. Every session gets its own sandbox worker, started on its first reset and closed
when the session closes, its client vanishes, or it idles past `idle_seconds`. OpenEnv's stateless
HTTP /reset, /step and /state would start a worker per request for an episode nobody can continue:
here they answer 409 and name the session route.

Bounds: at most `max_sessions` sessions (workers) at once over all environments served (serve_sessions:
one more is refused with CAPACITY_REACHED, a closed session's slot is free when its close is read),
at most `max_message_bytes` per WebSocket message or HTTP body, at most `connections()` connections,
each request's head and body within `request_seconds` (serve_guard: slow clients are closed, a new
connection closes the longest-waiting idle one). The environment's code runs only in the sandbox
workers; this process reads its folder as data.
"""
from __future__ import annotations

import json
import math
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from fastapi import FastAPI, Request, WebSocketDisconnect
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse
from openenv.core.env_server.types import Action, ConcurrencyConfig, EnvironmentMetadata, Observation, State
from pydantic import Field, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError
from uvicorn.protocols.utils import ClientDisconnected

from envforge.pipeline import __version__, layout
from envforge.pipeline.api.environment import Environment, Session
from envforge.pipeline.api.options import ServeOptions
from envforge.pipeline.api.serve_guard import Guard, protocol
from envforge.pipeline.api.serve_sessions import Capacity, Sessions
from envforge.pipeline.errors import UserError
from envforge.pipeline.kinds import normalize
from envforge.pipeline.sandbox import SandboxFailure

STATELESS = ("/reset", "/step", "/state")  # OpenEnv's per-request routes, refused here (see the docstring)
KEPT = ("/ws", "/schema", "/health", "/metadata")  # what a session and a client's discovery need
TEXT_CHARS = 4096  # the longest action text or parameter value a step takes
LEVEL_CHARS = 300
SEED_MAX = 2**31 - 1
DEFAULTS = ServeOptions()


class EnvforgeObservation(Observation):
    """What a reset or a step shows: the rendered observation and what the step came to. `reward`
    is the step's reward; `done` is terminated or truncated, which `metadata` tells apart."""

    text: str = Field(default="", description="the observation, rendered as the environment draws it")
    events: list[str] = Field(default_factory=list, description="what the environment said happened")
    last_action_result: Any = Field(default=None, description="the environment's feedback on the action")
    level: str = Field(default="", description="the level played: a level file, or seed:N for a generated one")
    step: int = Field(default=0, description="steps taken in this episode")
    total_reward: float = Field(default=0.0, description="the episode's rewards so far")


class EnvforgeState(State):
    """The session's episode: its id and step count (OpenEnv's), the level, the total so far."""

    level: Optional[str] = None
    total_reward: float = 0.0
    done: bool = False


class _ActionBase(Action):
    """An action: `action` (a declared action's name) with its `params`, or `text`, an action as
    `envforge play` reads it (`move north`, `move direction=north`, JSON)."""

    params: dict[str, Any] = Field(default_factory=dict, description="the action's parameters")
    text: Optional[str] = Field(default=None, max_length=TEXT_CHARS,
                                description="an action as `envforge play` reads it, instead of action + params")

    @field_validator("params")
    @classmethod
    def _small_params(cls, params: dict) -> dict:
        if len(params) > 32 or any(len(str(k)) > 100 or len(str(v)) > TEXT_CHARS for k, v in params.items()):
            raise _invalid(f"expected at most 32 parameters of at most {TEXT_CHARS} characters each")
        return params

    @model_validator(mode="after")
    def _one_form(self):
        if (getattr(self, "action", None) is None) == (self.text is None):
            raise _invalid("expected either action (with params) or text, found "
                           + ("both" if self.text is not None else "neither"))
        return self


def _invalid(message: str) -> PydanticCustomError:
    """A validation error whose details are plain data: OpenEnv sends them back as JSON, and a
    ValueError among them would fail that send and end the session."""
    return PydanticCustomError("envforge_action", message)


def action_model(env: Environment) -> type[Action]:
    """The environment's action model: `action` is one of its declared action names (a string
    when it declares none, as some AutoEnv-format folders do)."""
    names = tuple(env.spec.actions.names)
    kind = Literal[names] if names else str  # type: ignore[valid-type]
    return create_model(f"{_class_name(env.name)}Action", __base__=_ActionBase,
                        action=(Optional[kind], Field(default=None, description="the action's name: "
                                                      + (", ".join(names) or "any"))))


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_") if part.isidentifier()) or "Env"


@dataclass
class Served:
    """One environment folder served: read once on the host, its code never imported."""

    env: Environment
    action_cls: type[Action]
    capacity: Capacity
    skin: str | None = None
    live: set = field(default_factory=set)  # the sessions holding a worker (for tests and shutdown)


class EnvforgeEnvironment(OpenEnvEnvironment):
    """One client session: a sandbox worker playing episodes of one environment."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: Served):
        super().__init__()
        self._served = served
        self._session: Session | None = None
        self._state = EnvforgeState(episode_id=None, step_count=0)
        self._max: tuple[float | None, str] = (None, "")
        self._done = True
        self._lock = threading.Lock()
        self._closed = False

    # -- OpenEnv's interface -----------------------------------------------------------------
    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, level: Optional[str] = None,
              difficulty: Optional[str] = None, **kwargs: Any) -> EnvforgeObservation:
        """A new episode: on `level` (a level id such as level_01 or val_levels/level_11); else, with
        `difficulty` (easy, medium, hard or a score range "LO..HI"), on a test level in that band (the
        `seed`-th of them, cyclically; the first without a seed); else on the level the generator makes
        from `seed`, else on the first test level."""
        if kwargs:
            raise ValueError(f"reset: expected seed, level, difficulty or episode_id, found "
                             f"{', '.join(sorted(kwargs))[:200]}")
        chosen = self._level(seed, level) if difficulty is None or level is not None else \
            self._in_band(seed, difficulty)
        with self._lock:
            session = self._worker()
            try:
                first = session.reset(chosen, None) if chosen is not None else session.reset(None, seed)
            except SandboxFailure as f:
                self._drop_worker()
                raise RuntimeError(f"the environment failed in the sandbox on reset: {f}") from None
            self._max = self._served.env.spec.scoring_max(session.level) if chosen is not None else (None, "")
            self._done = False
            self._state = EnvforgeState(episode_id=_episode_id(episode_id), step_count=0, level=session.level)
            profile = self._served.env.difficulty(session.level) if chosen is not None else None
            return self._observation(first, session.level, {"difficulty": profile} if profile else {})

    def step(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> EnvforgeObservation:
        with self._lock:
            if self._session is None or self._state.level is None:
                raise RuntimeError("step before reset: send reset first")
            if self._done:
                raise RuntimeError("the episode has ended: send reset for a new one")
            chosen = self._parse(action)
            try:
                out = self._session.step(chosen)
            except SandboxFailure as f:
                self._done = True
                self._drop_worker()
                raise RuntimeError(f"the environment failed in the sandbox: {f}; the episode is over, "
                                   "reset starts a new worker") from None
            self._done = out.done
            self._state = EnvforgeState(episode_id=self._state.episode_id, step_count=out.steps,
                                        level=self._state.level, total_reward=out.total_reward, done=out.done)
            invalid = self._served.env.spec.actions.sent_invalid(chosen, out.events)
            return self._observation(out, self._state.level, {"action": chosen, "invalid": invalid})

    @property
    def state(self) -> EnvforgeState:
        return self._state

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_worker()

    def get_metadata(self) -> EnvironmentMetadata:
        env = self._served.env
        return EnvironmentMetadata(name=env.name, description=env.instruction[:2000], version=__version__,
                                   readme_content=env.action_text[:20_000])

    # -- the rest ------------------------------------------------------------------------------
    def _worker(self) -> Session:
        if self._closed:
            raise RuntimeError("the session is closed")
        if self._session is None:
            self._served.capacity.start_worker()
            try:
                self._session = self._served.env.session(skin=self._served.skin)
            except BaseException:
                self._served.capacity.worker_stopped()
                raise
            self._served.live.add(self)
        return self._session

    def _drop_worker(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                session.close()
            finally:
                self._served.live.discard(self)
                self._served.capacity.worker_stopped()

    def _in_band(self, seed: Any, difficulty: Any) -> str:
        if not isinstance(difficulty, str) or not 0 < len(difficulty) <= LEVEL_CHARS:
            raise ValueError(f"reset: difficulty: expected easy, medium, hard or LO..HI, found "
                             f"{type(difficulty).__name__}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX):
            raise ValueError(f"reset: seed: expected an integer 0..{SEED_MAX}, found {str(seed)[:50]!r}")
        try:
            levels = self._served.env.levels("test", difficulty)
        except UserError as e:
            raise ValueError(f"reset: {e}") from None
        return levels[(seed or 0) % len(levels)]

    def _level(self, seed: Any, level: Any) -> str | None:
        if level is not None:
            if not isinstance(level, str) or not 0 < len(level) <= LEVEL_CHARS:
                raise ValueError(f"reset: level: expected a level id of at most {LEVEL_CHARS} characters, "
                                 f"found {type(level).__name__}")
            try:
                return self._served.env.level(level)
            except UserError as e:
                raise ValueError(f"reset: {str(e).replace('--level', 'level')}") from None
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
                raise ValueError(f"reset: seed: expected an integer 0..{SEED_MAX}, found {str(seed)[:50]!r}")
            return None
        levels = self._served.env.levels("test")
        if not levels:
            raise ValueError("reset: expected a level or a seed: this environment ships no test levels")
        return levels[0]

    def _parse(self, action: Action) -> dict:
        text = getattr(action, "text", None)
        if text is not None:
            try:
                return self._served.env.parse_action(text)
            except ValueError as e:
                raise ValueError(f"step: text: expected an action ({self._served.env.describe_actions()[:300]}), "
                                 f"found {text[:200]!r}: {e}") from None
        return {"action": str(action.action), "params": dict(action.params)}

    def _observation(self, step, level: str, extra: dict) -> EnvforgeObservation:
        max_reward, note = self._max
        normalized, _, _, note = normalize(step.total_reward, max_reward, level, note)
        solved = max_reward is not None and max_reward > 0 and step.total_reward >= max_reward - 1e-9
        metadata = {"terminated": step.terminated, "truncated": step.truncated, "max_reward": max_reward,
                    "normalized": normalized, "normalized_note": note, "solved": solved,
                    "max_steps": self._served.env.max_steps, **extra}
        reward = step.reward if math.isfinite(step.reward) else None
        return EnvforgeObservation(text=str(step.observation), events=[str(e) for e in step.events],
                                   last_action_result=step.last_action_result, level=level, step=step.steps,
                                   total_reward=step.total_reward, reward=reward, done=step.done, metadata=metadata)


def _episode_id(given: Any) -> str:
    if given is None:
        return uuid.uuid4().hex
    if not isinstance(given, str) or not 0 < len(given) <= 200:
        raise ValueError("reset: episode_id: expected a string of at most 200 characters")
    return given


def build_app(env_dirs: list[str], options: ServeOptions = DEFAULTS) -> tuple[FastAPI, dict[str, Served]]:
    """The server's app and what it serves, by route prefix name."""
    envs = [Environment(e.path) for d in env_dirs for e in (layout.find_envs(d) or [_missing(d)])]
    names = [e.name for e in envs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"ENV_DIR: expected environments with distinct names (each is served at /NAME), "
                        f"found {', '.join(twice)} more than once")
    capacity = Capacity(options.max_sessions)
    root = FastAPI(title="envforge serve", version=__version__)
    served: dict[str, Served] = {}
    for env in envs:
        if options.skin is not None and options.skin not in env.skins():
            raise UserError(f"--skin: expected one of {', '.join(env.skins()) or '(none)'} for {env.name}, "
                            f"found {options.skin!r}")
        one = Served(env, action_model(env), capacity, options.skin)
        served[env.name] = one
        # Sessions are admitted, idled out and freed by serve_sessions.Sessions; OpenEnv's own reaper is off.
        server = HTTPEnvServer(_factory(one), one.action_cls, EnvforgeObservation, env_name=env.name,
                               concurrency_config=ConcurrencyConfig(max_concurrent_envs=options.max_sessions,
                                                                    session_timeout=None))
        app = FastAPI(title=f"envforge serve: {env.name}", version=__version__, servers=[{"url": f"/{env.name}"}],
                      openapi_url=None, docs_url=None, redoc_url=None)
        server.register_routes(app, mode="production")
        app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") in KEPT]
        for path in STATELESS:
            app.add_api_route(path, _stateless(env.name), methods=["GET", "POST"], include_in_schema=False)
        app.add_api_route("/mcp", _mcp(env.name), methods=["POST"], summary="JSON-RPC: no MCP tools are served")
        app.add_api_route("/openapi.json", _openapi(app), methods=["GET"], include_in_schema=False)
        root.include_router(app.router, prefix=f"/{env.name}")
        if len(envs) == 1:
            root.include_router(app.router)

    @root.get("/", include_in_schema=False)
    def index() -> dict:
        return {"envforge": __version__, "environments": {n: f"/{n}/ws" for n in served},
                "max_sessions": options.max_sessions, "sessions": capacity.sessions, "workers": capacity.workers,
                "idle_seconds": options.idle_seconds, "max_message_bytes": options.max_message_bytes}

    root.add_middleware(_BodyLimit, limit=options.max_message_bytes)
    root.add_middleware(Sessions, capacity=capacity, idle_seconds=options.idle_seconds)
    return root, served


def _missing(path: str):
    raise UserError(f"{path}: expected an environment folder ({', '.join(layout.REQUIRED_FILES)}) or a folder "
                    "holding some, found none")


def _factory(served: Served):
    def make() -> EnvforgeEnvironment:
        return EnvforgeEnvironment(served)
    make.__name__ = f"envforge:{served.env.name}"
    return make


def _openapi(app: FastAPI):
    def document() -> dict:
        return app.openapi()
    return document


def _mcp(name: str):
    """POST /NAME/mcp: a JSON-RPC 2.0 endpoint that serves no tools. envforge's episodes live in sandbox
    workers held by sessions; a tool call without one would start a worker per call (as /step would)."""
    async def answer(request: Request) -> JSONResponse:
        try:
            call = json.loads(await request.body())
        except ValueError:
            return _rpc(JsonRpcErrorCode.PARSE_ERROR, "expected a JSON-RPC 2.0 request, found no JSON", None)
        ident = call.get("id") if isinstance(call, dict) else None
        ident = ident if isinstance(ident, (str, int)) and not isinstance(ident, bool) else None
        method = call.get("method") if isinstance(call, dict) else None
        if not isinstance(call, dict) or call.get("jsonrpc") != "2.0" or not isinstance(method, str):
            return _rpc(JsonRpcErrorCode.INVALID_REQUEST, 'expected a JSON-RPC 2.0 request object ({"jsonrpc": '
                        '"2.0", "method": ..., "id": ...})', ident)
        return _rpc(JsonRpcErrorCode.METHOD_NOT_FOUND, f"{method[:100]!r}: envforge serves no MCP tools; play {name} "
                    f"in a session at /{name}/ws (OpenEnv's EnvClient: reset, step, state)", ident)
    return answer


def _rpc(code: JsonRpcErrorCode, message: str, ident) -> JSONResponse:
    return JSONResponse(JsonRpcResponse.error_response(code, message, request_id=ident).model_dump())


def _stateless(name: str):
    async def refuse() -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": (
            f"envforge environments keep their episode in a sandbox worker: open a session at /{name}/ws "
            "(OpenEnv's EnvClient does) and send reset, step and state there")})
    return refuse


class _BodyLimit:
    """Refuses an HTTP request body over `limit` bytes (413) before any handler reads it; the
    WebSocket's messages are bounded by the server's ws_max_size. A session whose client vanished
    ends quietly (its worker is closed by then), not with a traceback per client."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            try:
                return await self.app(scope, receive, send)
            except (
                ClientDisconnected,
                WebSocketDisconnect,
            ):  # OpenEnv's last word to a client that vanished: its session is closed
                return None
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _too_large(send, self.limit)
        seen = 0

        async def bounded():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, bounded, send)
        except _TooLarge:
            await _too_large(send, self.limit)


class _TooLarge(Exception):
    pass


async def _too_large(send, limit: int) -> None:
    body = f'{{"detail": "expected a request body of at most {limit} bytes"}}'.encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def serve(env_dirs: list[str], options: ServeOptions = DEFAULTS, ready=None) -> None:
    """Run the server until interrupted. `ready(host, port, names)` is called once it listens."""
    import socket

    import uvicorn

    app, served = build_app(env_dirs, options)
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((options.host, options.port))
    except OSError as e:
        sock.close()
        raise UserError(f"--host {options.host} --port {options.port}: expected an address this machine can "
                        f"listen on, found {e.strerror or e}") from None
    sock.listen(128)  # connections made from here on wait for the server: `ready` may announce it
    host, port = sock.getsockname()[:2]
    # Connections are bounded by serve_guard (uvicorn's limit_concurrency would count the silent ones
    # against everyone: 503 for all); a head over 16 KiB is refused by h11; dead WebSocket peers by ping.
    guard = Guard(total=options.connections(), per_client=options.connections_per_client(),
                  seconds=options.request_seconds)
    config = uvicorn.Config(app, log_level="warning", http=protocol(guard), ws_max_size=options.max_message_bytes,
                            ws_ping_interval=20.0, ws_ping_timeout=20.0, timeout_keep_alive=5,
                            h11_max_incomplete_event_size=16 * 1024)
    server = uvicorn.Server(config)
    if ready is not None:
        ready(host, port, list(served))
    try:
        server.run(sockets=[sock])
    finally:
        for one in served.values():
            for session in list(one.live):
                session.close()
        sock.close()
