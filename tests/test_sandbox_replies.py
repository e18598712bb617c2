"""The host checks every worker reply (issue 15, group 3): a worker that patches its own checks
still cannot hand the host a NaN reward, a wrong shape or a reply nested too deep."""
from __future__ import annotations

from pathlib import Path

import pytest

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside import replies
from envforge.pipeline.sandbox.outside.client import EnvClient

HOSTILE = Path(__file__).parent / "hostile"


def test_a_nan_reward_forged_past_the_workers_own_checks_is_refused_on_the_host():
    with EnvClient.open(EnvSpec.open(HOSTILE / "forged_nan"), SandboxLimits(call_seconds=30)) as env:
        env.reset("levels/level_01.yaml")
        with pytest.raises(SandboxFailure) as caught:
            env.step({"action": "go", "params": {}})
        # The worker's reward check was patched away, so this is the host's (replies.reward): its
        # detail has no file and line, which the worker's own check would have given.
        assert (caught.value.kind, caught.value.where) == ("invalid_reward", "")
        assert caught.value.detail.startswith("reward: expected a finite number, found")
        assert env.worker.failed, "a worker that lied is not reused"


@pytest.mark.parametrize("result, found", [
    ([1, 2], "expected a mapping, found list"),
    ({"observation": "x", "state_hash": "h", "reward": 1.0, "events": [], "terminated": "yes"},
     "terminated: expected bool, found str"),
    ({"observation": "x", "reward": 1.0, "events": [], "terminated": False}, "expected the field 'state_hash'"),
])
def test_a_step_reply_of_the_wrong_shape_is_a_protocol_failure(result, found):
    fields = {"observation": replies.JSON, "state_hash": str, "reward": replies.JSON, "events": list,
              "terminated": bool}
    with pytest.raises(SandboxFailure) as caught:
        replies.shaped(result, "step", fields)
    assert caught.value.kind == "protocol" and found in caught.value.detail


def test_a_reply_nested_20000_deep_is_refused_without_recursion():
    deep: list = []
    for _ in range(20_000):
        deep = [deep]
    with pytest.raises(SandboxFailure) as caught:
        replies.plain({"state": deep}, "observe")
    assert caught.value.kind == "protocol" and f"nested deeper than {replies.MAX_DEPTH}" in caught.value.detail
