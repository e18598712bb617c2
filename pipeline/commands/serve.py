"""envforge serve ENV_DIR… [--host 127.0.0.1] [--port N]: environments as an OpenEnv server.

The server itself is pipeline.api.serve (pip install 'envforge[openenv]').
"""
from __future__ import annotations

import ipaddress
import sys

from pipeline.api.values import number, whole
from pipeline.commands._flags import flag_type
from pipeline.errors import UserError

HINT = "envforge serve: expected OpenEnv to be installed, found no module {name!r}: pip install 'envforge[openenv]'"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="serve environments to OpenEnv clients (RL trainers) over HTTP/WebSocket",
        description="Serve environments in OpenEnv's shape: each at /NAME (/NAME/ws for a session: reset, "
                    "step, state), each client session with its own sandbox worker. Binds to loopback "
                    "unless --host says otherwise. Needs pip install 'envforge[openenv]'.")
    p.add_argument("env_dirs", nargs="+", metavar="ENV_DIR", help="an environment folder, or a folder holding some")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 serves the network, "
                        "with no authentication)")
    p.add_argument(
        "--port", type=flag_type(whole(0, 65535)), default=8000, help="port (default 8000; 0: a free one, printed)"
    )
    p.add_argument("--max-sessions", type=flag_type(whole(1, 1024)), default=8,
                   help="sessions (sandbox workers) at once over all environments (default 8)")
    p.add_argument("--idle-seconds", type=flag_type(number(1.0, 86_400.0)), default=300.0,
                   help="close a session, and its worker, after this long without a message (default 300)")
    p.add_argument("--max-message-kb", type=flag_type(whole(1, 16 * 1024)), default=64,
                   help="largest WebSocket message or request body in KiB (default 64)")
    p.add_argument("--skin", help="serve this skin of the environments (see envforge reskin)")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        from pipeline.api.serve import ServeOptions, serve
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("openenv", "fastapi", "uvicorn", "pydantic"):
            raise UserError(HINT.format(name=e.name)) from None
        raise
    options = ServeOptions(host=args.host, port=args.port, max_sessions=args.max_sessions,
                           idle_seconds=args.idle_seconds, max_message_bytes=args.max_message_kb * 1024,
                           max_connections=max(16, 4 * args.max_sessions), skin=args.skin)
    serve(args.env_dirs, options, ready=lambda host, port, names: _announce(host, port, names, options))
    return 0


def _announce(host: str, port: int, names: list[str], options) -> None:
    shown = f"[{host}]" if ":" in host else host
    for name in names:
        print(f"envforge serve: {name} at http://{shown}:{port}/{name} (session: ws://{shown}:{port}/{name}/ws)")
    if _loopback(host):
        print(f"envforge serve: listening on {shown}:{port}, loopback only (this machine); --host 0.0.0.0 serves "
              f"other machines")
    else:
        print(f"envforge serve: listening on {shown}:{port}, reachable from other machines, with no "
              f"authentication", file=sys.stderr)
    print(
        f"envforge serve: at most {options.max_sessions} session(s) at once, each its own sandbox worker, closed "
        f"after {options.idle_seconds:g}s idle; messages up to {options.max_message_bytes // 1024} KiB. Ctrl-C stops.",
        flush=True,
    )
    sys.stderr.flush()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
