"""`envforge generate` against a misbehaving provider (issue 22): forged and missing usage and
runaway replies on the real OpenAI and Anthropic wire, through the loopback server. Each test
asserts what a user sees: the calls made under the cap, the bytes sent and stored, each theme's
verdict and stage, and the exit code."""
from __future__ import annotations

import json
import math
import urllib.request

import pytest

from llm_server import USAGE_FORGERIES, Reply, forged_usage, runaway_text


def _post(server, path: str, body: dict) -> dict:
    request = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_the_fixture_sends_forged_usage_as_it_is_and_counts_bytes(llm_server, path):
    llm_server.script = [Reply("a", usage=forged_usage(kind)) for kind in USAGE_FORGERIES]
    answers = [_post(llm_server, path, {"model": "m", "messages": []}) for _ in USAGE_FORGERIES]
    by_kind = dict(zip(USAGE_FORGERIES, answers))
    openai = path.endswith("completions")
    usage = {kind: answer.get("usage") for kind, answer in by_kind.items()}
    assert usage["missing"] is None and "usage" not in by_kind["missing"]
    assert usage["negative"]["prompt_tokens" if openai else "input_tokens"] == -100_000_000
    assert math.isnan(usage["nan"]["completion_tokens" if openai else "output_tokens"])
    assert usage["string"]["completion_tokens" if openai else "output_tokens"] == "lots"
    assert (usage["over_cached"]["prompt_tokens_details"]["cached_tokens"] if openai
            else usage["over_cached"]["cache_read_input_tokens"]) == 10_000_000
    assert set(usage["partial"]) == {"completion_tokens" if openai else "output_tokens"}
    assert llm_server.count() == len(USAGE_FORGERIES)
    assert llm_server.bytes_received == len(USAGE_FORGERIES) * len(b'{"model": "m", "messages": []}')

    llm_server.script = [Reply(runaway_text(20))]
    big = _post(llm_server, path, {"model": "m", "messages": []})
    text = big["choices"][0]["message"]["content"] if openai else big["content"][0]["text"]
    assert len(text) == 20_000_000 and llm_server.bytes_sent > 20_000_000
