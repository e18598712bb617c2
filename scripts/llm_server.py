"""Run the loopback model server (pipeline/testing/llm_server.py) by hand, for manual checks:

    python scripts/llm_server.py --every-other 429   # answer 429 to requests 1, 3, 5, ...
    python scripts/llm_server.py --always 401        # refuse every request
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envforge.pipeline.testing.llm_server import Fault, LLMServer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description="A loopback model server speaking the Anthropic and OpenAI wire formats."
    )
    parser.add_argument("--every-other", type=int, metavar="STATUS", help="fail requests 1, 3, 5, ... with STATUS")
    parser.add_argument("--always", type=int, metavar="STATUS", help="fail every request with STATUS")
    args = parser.parse_args()
    server = LLMServer()
    if args.every_other:
        server.rule = lambda n: Fault(status=args.every_other, headers={"retry-after": "1"}) if n % 2 == 1 else None
    if args.always:
        server.rule = lambda n: Fault(status=args.always, message="invalid x-api-key")
    server.start()
    print(f"listening on {server.url} (OpenAI base URL {server.openai_url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
