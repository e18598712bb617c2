"""The one protocol between envforge and a sandbox worker (pipeline/sandbox/protocol.py): both hosts
answer through its one dispatch, and the operations it names are exactly the ones they answer."""
import json

from envforge.pipeline.sandbox import protocol
from envforge.pipeline.sandbox.inside.agent_host import AgentHost
from envforge.pipeline.sandbox.inside.host import EnvHost


def _ops(cls) -> set[str]:
    return {name.removeprefix("op_") for name in dir(cls) if name.startswith("op_")}


def test_each_host_answers_exactly_the_operations_the_protocol_names():
    assert _ops(EnvHost) == set(protocol.ENV_OPS)
    assert _ops(AgentHost) == set(protocol.AGENT_OPS)
    assert protocol.OPENING in protocol.ENV_OPS and protocol.OPENING in protocol.AGENT_OPS


def test_both_hosts_dispatch_through_the_one_handle(tmp_path):
    assert EnvHost.handle is protocol.Dispatcher.handle is AgentHost.handle
    env, agent = EnvHost(str(tmp_path)), AgentHost(str(tmp_path), ask=lambda kind, args: None)
    assert env.handle({"op": "reset", "args": {}}) == protocol.failure_reply("usage", "'reset' before 'load'")
    assert agent.handle({"op": "act", "args": {"turn": {}}}) == protocol.failure_reply("usage", "'act' before 'start'")
    for host in (env, agent):
        assert host.handle({"op": "capture"}) == protocol.failure_reply("usage", "unknown operation 'capture'")
    missing = agent.handle({"op": "load", "args": {}})
    assert (missing["ok"], missing["kind"], missing["where"]) == (False, "load", protocol.AGENT_FILE)


def test_a_reply_that_is_not_plain_json_is_encoded_as_a_typed_failure():
    line = protocol.encode({"ok": True, "result": float("nan")})
    reply = json.loads(line)
    assert line.endswith(b"\n") and (reply["ok"], reply["kind"]) == (False, "not_json")

