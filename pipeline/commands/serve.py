"""envforge serve ENV_DIR… [--host 127.0.0.1] [--port N]: environments as an OpenEnv server.

The server itself is pipeline.api.serve (pip install 'envforge-rl[openenv]').
"""
from __future__ import annotations

import ipaddress
import sys

from envforge.pipeline import install_hint
from envforge.pipeline.api.options import ServeOptions
from envforge.pipeline.commands._flags import command, env_dirs
from envforge.pipeline.errors import UserError

HINT = "envforge serve: expected OpenEnv to be installed, found no module {name!r}: " + install_hint("openenv")


DESCRIPTION = """Serve environments in OpenEnv's shape: each at /NAME (/NAME/ws for a session: reset, step, state),
each client session with its own sandbox worker. Binds to loopback unless --host says otherwise.
Needs pip install 'envforge-rl[openenv]'."""


@command("serve", ServeOptions, description=DESCRIPTION, without=["max_connections"],
         help="serve environments to OpenEnv clients (RL trainers) over HTTP/WebSocket",
         arguments=[env_dirs(nargs="+")])
def run(args, options: ServeOptions) -> int:
    try:
        from envforge.pipeline.api.serve import serve
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("openenv", "fastapi", "uvicorn", "pydantic"):
            raise UserError(HINT.format(name=e.name)) from None
        raise
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
