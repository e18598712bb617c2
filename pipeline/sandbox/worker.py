"""Entry point of a sandbox worker process: confine, then answer requests until EOF.

Started only by pipeline.sandbox.process.Worker. Requests and replies are JSON lines on
two inherited pipes (not stdin/stdout, which the environment may print to).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal

from pipeline.sandbox import confine, host
from pipeline.sandbox.limits import EXIT_ALARM, Limits

# A worker enforces its own deadline too, a little after the parent's, so that a worker
# whose parent was killed mid-call does not run on forever.
GRACE_SECONDS = 5


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--fds", required=True)
    parser.add_argument("--limits", required=True)
    args = parser.parse_args()
    request_fd, reply_fd = (int(x) for x in args.fds.split(","))
    env_dir = confine.confine(args.mode, args.base, args.uid, Limits(**json.loads(args.limits)))
    limits = Limits(**json.loads(args.limits))
    env_host = host.EnvHost(env_dir)
    signal.signal(signal.SIGALRM, lambda *_: os._exit(EXIT_ALARM))
    with os.fdopen(request_fd, "rb") as requests:
        for line in requests:
            try:
                request = json.loads(line)
            except ValueError:
                reply = {"ok": False, "kind": "protocol", "detail": "request is not JSON"}
            else:
                signal.alarm(math.ceil(request.get("timeout") or limits.call_seconds) + GRACE_SECONDS)
                reply = env_host.handle(request)
                signal.alarm(0)
            data = host.encode(reply)
            view = memoryview(data)
            while view:
                view = view[os.write(reply_fd, view):]


if __name__ == "__main__":
    main()
