"""Record every call as a readable file; replay them offline, tool calls included."""
import asyncio
import re
from pathlib import Path

import pytest
import yaml

from envforge.pipeline.llm import LLMClient, Message, ReplayInvalid, ReplayMissing, ToolSpec, resolve
from envforge.pipeline.testing.llm_server import Reply

DOCS = Path(__file__).resolve().parent.parent / "docs" / "replay_format.md"
TOOLS = [ToolSpec("write_file", "Write a file.", {"type": "object"}), ToolSpec("run_check", "Run the checker.")]


def agent_session(client, theme="Ice Maze (hard)", turns=3):
    """A small coding-agent loop: call, answer each tool call, until the model stops calling tools."""
    async def go():
        conversation = [Message.system("You write environments."), Message.user("Write the ice maze.")]
        replies = []
        async with client:
            for _ in range(turns):
                response = await client.complete(conversation, theme=theme, stage="code", tools=TOOLS)
                replies.append(response)
                if not response.tool_calls:
                    break
                conversation.append(response.to_message())
                conversation += [Message.tool_result(c, f"ran {c.name}") for c in response.tool_calls]
        return replies
    return asyncio.run(go())


def test_recorded_session_replays_offline_with_its_tool_calls(llm_server, make_llm_client, tmp_path):
    llm_server.script = [
        Reply("Writing.", tool_calls=[("write_file", {"path": "env_main.py", "content": "a = 1\nb = 2\n"})]),
        Reply("", tool_calls=[("run_check", {})]),
        Reply("Done."),
    ]
    recorded = agent_session(make_llm_client(no_cache=True, record_dir=str(tmp_path / "rec")))

    folder = tmp_path / "rec" / "ice-maze-hard" / "code"
    assert sorted(p.name for p in folder.iterdir()) == ["001.yaml", "002.yaml", "003.yaml"]
    first = (folder / "001.yaml").read_text()
    assert "content: |\n" in first and "a = 1\n" in first  # file contents stay readable
    assert yaml.safe_load((folder / "002.yaml").read_text())["request"]["messages"][0]["role"] == "tool"

    llm_server.stop()  # replay must not need the network
    replayer = LLMClient(resolve(provider="replay", replay_dir=str(tmp_path / "rec")))
    replayed = agent_session(replayer)
    assert [(r.text, r.tool_calls, r.stop_reason) for r in replayed] == [
        (r.text, r.tool_calls, r.stop_reason) for r in recorded]
    assert replayer.ledger.run.replayed == 3 and replayer.ledger.run.cost_usd == 0
    assert "3 call(s) replayed" in replayer.ledger.summary()


def test_a_missing_recording_names_theme_stage_call_and_path(tmp_path):
    (tmp_path / "ice-maze-hard" / "code").mkdir(parents=True)
    (tmp_path / "ice-maze-hard" / "code" / "001.yaml").write_text("response:\n  text: hi\n")
    client = LLMClient(resolve(provider="replay", replay_dir=str(tmp_path)))
    with pytest.raises(ReplayMissing) as error:
        agent_session(client)  # call 1 ends without tool calls, so ask again in a new session
        agent_session(client)
    expected = tmp_path / "ice-maze-hard" / "code" / "002.yaml"
    assert str(error.value) == (f"no recording for call 2 of stage 'code' of theme 'Ice Maze (hard)': "
                                f"expected the file {expected}")


def test_the_hand_written_example_in_the_docs_replays(tmp_path):
    text = DOCS.read_text()
    for name, body in re.findall(r"`demo/(ice-maze/code/\d{3}\.yaml)`\n\n```yaml\n(.*?)```", text, re.S):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    replies = agent_session(LLMClient(resolve(provider="replay", replay_dir=str(tmp_path))), theme="ice maze")
    assert [[c.name for c in r.tool_calls] for r in replies] == [["write_file"], ["run_check"], []]
    written = replies[0].tool_calls[0]
    assert written.id == "call_code_001_1" and written.arguments["path"] == "env_main.py"
    assert written.arguments["content"].startswith("from pipeline.runtime import BaseEnv\n")
    assert replies[0].usage.input_tokens == 2100 and replies[2].stop_reason == "end_turn"


def test_a_broken_recording_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "_" / "design" / "001.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("response:\n  tool_calls:\n    - name: write_file\n      arguments: [not, a, mapping]\n")
    client = LLMClient(resolve(provider="replay", replay_dir=str(tmp_path)))

    async def go():
        await client.complete([Message.user("x")], stage="design")

    with pytest.raises(ReplayInvalid, match=re.escape(f"{path}: response.tool_calls[0].arguments: expected a mapping")):
        asyncio.run(go())


def test_cache_hits_are_recorded_too_so_a_recording_is_complete(llm_server, make_llm_client, tmp_path):
    agent_session(make_llm_client(), turns=1)
    agent_session(make_llm_client(record_dir=str(tmp_path / "rec")), turns=1)
    assert llm_server.count() == 1
    assert (tmp_path / "rec" / "ice-maze-hard" / "code" / "001.yaml").is_file()
