"""`envforge generate` against a runaway coding agent (issue 22, items 2-4), on the real OpenAI and
Anthropic wire through the loopback server: thousands of tool calls in one reply, many checks,
read_file amplification, a rewrite of config.yaml after the DSL stage, hostile file names.
Each test asserts what a user sees: the theme's verdict and stage, the exit code, the files on
disk, and the bytes of every request sent to the model."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from cli_kit import envforge

from envforge.pipeline.generate.agent import MAX_TOOL_CALLS_PER_REPLY, READ_CHARS, RECENT_CHARS
from envforge.pipeline.testing import replay_kit, tiny_env
from envforge.pipeline.testing.llm_server import RawJSON, Reply

pytestmark = pytest.mark.slow  # measured: a whole generate (coding agent, check, verify) in each test

DSL = "```yaml\n" + yaml.safe_dump(tiny_env.CONFIG, sort_keys=False) + "```\n"
FILES = replay_kit.corridor_files()
# A request of the coding agent: the system prompt and the task (under 30 KB here), the newest
# turns up to RECENT_CHARS, a short note for each older one; JSON escaping adds some.
MAX_REQUEST_BYTES = 2 * RECENT_CHARS + 60_000


def writes(files: dict) -> list:
    return [("write_file", {"path": name, "content": text}) for name, text in files.items()]


def generate(server, tmp_path: Path, script: list, wire: str = "openai", *extra: str) -> tuple:
    """One theme through generate, the model answering `script` in order after design and dsl
    (then "ok" with no tool call). Returns (completed process, summary, output folder)."""
    server.script = [Reply(replay_kit.DESIGN), Reply(DSL), *script]
    themes = tmp_path / "themes.yaml"
    themes.write_text("- {name: corridor, theme: A corridor walk}\n")
    out = tmp_path / "out"
    model, base, key = (("openai/gpt-4o-mini", server.openai_url, "OPENAI_API_KEY") if wire == "openai"
                        else ("anthropic/claude-haiku-4-5", server.url, "ANTHROPIC_API_KEY"))
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update({key: "test-key", "NO_PROXY": "127.0.0.1", "ENVFORGE_RETRY_BASE_DELAY": "0.01",
                "ENVFORGE_DOTENV": str(tmp_path / ".env")})
    done = envforge("generate", "--themes", themes, "--out", out, "--model", model, "--base-url", base, "--no-cache",
                    "--levels", "6", "--concurrency", "1", "--json", *extra, cwd=tmp_path, env=env, timeout=900,
                    traceback_ok=True)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done, json.loads(done.stdout), out


def request_sizes(server) -> list[int]:
    return [len(json.dumps(r["body"]).encode()) for r in server.requests]


def steps(folder: Path, stage: str) -> list[dict]:
    lines = (folder / "trajectory.jsonl").read_text().splitlines()
    return [e for e in (json.loads(line) for line in lines) if e.get("stage") == stage]


def theme_folder(out: Path) -> Path:
    found = [p for p in [*out.iterdir(), *(out / "_rejected").glob("*")] if (p / "theme.json").is_file()]
    assert len(found) == 1, found
    return found[0]


def test_thousands_of_writes_in_one_reply_run_at_most_the_cap_and_use_up_the_step_budget(llm_server, tmp_path):
    flood = [("write_file", {"path": f"junk{i}.py", "content": "x = 1\n"}) for i in range(3000)]
    done, summary, out = generate(llm_server, tmp_path, [Reply("", flood), Reply("", flood), Reply("", flood)])

    assert done.returncode == 1, done.stderr[-3000:]
    assert summary["rejected"]["corridor"]["stage"] == "code"
    assert "found them missing after 30 step(s) (it never called finish)" in \
        summary["rejected"]["corridor"]["reason"]
    folder = theme_folder(out)
    # 16 of the first reply, 14 of the second (the budget of 30 steps), none of the third: never asked.
    assert sorted(p.name for p in folder.glob("junk*.py")) == sorted(f"junk{i}.py" for i in range(16))
    assert llm_server.count() == 4  # design, dsl, two code replies
    code = steps(folder, "code")
    assert [e.get("dropped_tool_calls") for e in code if "tool_calls" in e] == [3000 - 16, 3000 - 14]
    assert sum("tool" in e for e in code) == 30
    second = json.dumps(llm_server.requests[3]["body"])
    assert f"Your reply asked for 3000 tool calls: at most {MAX_TOOL_CALLS_PER_REPLY} run per reply" in second
    assert max(request_sizes(llm_server)) < MAX_REQUEST_BYTES
    rejection = json.loads((folder / "rejection.json").read_text())
    assert rejection["details"]["steps"] == 30


def test_many_checks_in_one_reply_each_cost_a_step(llm_server, tmp_path):
    checks = [("run_check", {})] * 40
    script = [Reply("", checks), Reply("", writes(FILES)), Reply("", [("finish", {"summary": "done"})])]
    done, summary, out = generate(llm_server, tmp_path, script, "anthropic")

    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["accepted"] == ["corridor"]
    folder = out / "corridor"
    code = steps(folder, "code")
    assert sum(e.get("tool") == "run_check" for e in code) == MAX_TOOL_CALLS_PER_REPLY
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["stages"]["code"]["steps"] == MAX_TOOL_CALLS_PER_REPLY + len(FILES) + 1
    assert "Your reply asked for 40 tool calls" in json.dumps(llm_server.requests[3]["body"])


def test_read_file_amplification_keeps_every_request_bounded(llm_server, tmp_path):
    big = "".join(f"# note line {i:06d} of a long file the agent reads again and again\n" for i in range(2900))
    assert 190_000 < len(big) < 200_000
    reads = [("read_file", {"path": "notes.md"})] * MAX_TOOL_CALLS_PER_REPLY
    tail = [("read_file", {"path": "notes.md", "offset": 190_000})] + reads[:6]
    script = [Reply("", writes({**FILES, "notes.md": big})), Reply("", reads), Reply("", tail)]
    done, summary, out = generate(llm_server, tmp_path, script)

    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["accepted"] == ["corridor"]  # out of steps in code; check passes; verified
    code = steps(out / "corridor", "code")
    results = [e["result"] for e in code if e.get("tool") == "read_file"]
    assert len(results) == 30 - 7  # the budget: 7 writes, then 23 reads
    sizes = request_sizes(llm_server)
    assert max(sizes) < MAX_REQUEST_BYTES, sizes
    last = json.dumps(llm_server.requests[-1]["body"])
    assert "[elided to keep the conversation short: the output of read_file(notes.md), " in last
    # Each read returned at most READ_CHARS and said how to read on.
    sent = llm_server.requests[4]["body"]["messages"]
    outputs = [m["content"] for m in sent if m.get("role") == "tool" and "note line" in m["content"]]
    assert outputs and all(len(o) <= READ_CHARS + 200 for o in outputs)
    assert f"[characters 0-{READ_CHARS} of {len(big)} shown; call read_file with offset={READ_CHARS}" in outputs[-1]
    assert results[16].endswith(f"[characters 190000-{len(big)} of {len(big)} shown]")


def test_config_yaml_is_frozen_after_the_dsl_stage(llm_server, tmp_path):
    dsl_written = yaml.safe_dump(tiny_env.CONFIG, sort_keys=False)
    forged = dict(tiny_env.CONFIG, surprise=True)
    forged["termination"] = {**tiny_env.CONFIG["termination"], "max_steps": 100000}
    script = [Reply("", [("write_file", {"path": "config.yaml", "content": yaml.safe_dump(forged)}),
                         ("edit_file", {"path": "./config.yaml", "old": "max_steps", "new": "max_step"}),
                         *writes(FILES), ("run_check", {})]),
              Reply("", [("finish", {"summary": "done"})])]
    done, summary, out = generate(llm_server, tmp_path, script)

    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["accepted"] == ["corridor"]
    config = out / "corridor" / "config.yaml"
    assert config.read_text() == dsl_written
    check = envforge("dsl", "check", config)
    assert check.returncode == 0, check.stdout
    refused = [e["result"] for e in steps(out / "corridor", "code") if e.get("error")]
    assert len(refused) == 2 and all("config.yaml is fixed: the DSL stage wrote it" in r for r in refused)


def test_packaging_runs_the_dsl_check_again_so_a_broken_config_cannot_be_accepted_by_hand(llm_server, tmp_path):
    done, summary, out = generate(llm_server, tmp_path, [])  # the model never writes a file
    assert summary["rejected"]["corridor"]["stage"] == "code"
    config = out / "_rejected" / "corridor" / "config.yaml"
    config.write_text(config.read_text().replace("value_key: goal_rewards", "value_key: no_such_map"))
    accept = envforge("review", "--out", out, "accept", "corridor", "--reason", "ok")
    assert accept.returncode == 2, accept.stdout + accept.stderr
    assert "cannot be accepted" in accept.stderr and "fails `envforge dsl check`" in accept.stderr
    assert "reward.events[0].value_key" in accept.stderr
    assert not (out / "corridor").exists() and config.is_file()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_hostile_file_names_are_tool_errors_not_internal_errors(llm_server, tmp_path, wire):
    hostile = [("write_file", {"path": "a" * 297 + ".py", "content": "x = 1\n"}),
               ("write_file", {"path": "env\x00main.py", "content": "x = 1\n"}),
               ("write_file", {"path": "evil\nerror: forged line.py", "content": "x = 1\n"}),
               ("read_file", {"path": "design\x00.md"}),
               ("edit_file", {"path": "b" * 300 + ".py", "old": "a", "new": "b"}),
               ("read_file", {"path": "design.md", "offset": "ten"}),
               ("x" * 5000, {"path": "y"}),
               ("read_file", {"path": "calls.jsonl"})]
    script = [Reply("", hostile), Reply("", [*writes(FILES), ("run_check", {})]),
              Reply("", [("finish", {"summary": "done"})])]
    done, summary, out = generate(llm_server, tmp_path, script, wire)

    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["accepted"] == ["corridor"] and not summary["errors"]
    folder = out / "corridor"
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".py") == sorted(
        n for n in FILES if n.endswith(".py"))
    results = [e for e in steps(folder, "code") if "tool" in e][:len(hostile)]
    assert all(e["error"] for e in results), results
    assert "a name of 300 bytes (at most 255)" in results[0]["result"]
    assert "unprintable character '\\x00'" in results[1]["result"]
    assert "unprintable character '\\n'" in results[2]["result"]
    review = envforge("review", "--out", out, "show", "corridor")
    assert review.returncode == 0, review.stderr
    assert not any(line.startswith("error: forged line") for line in review.stdout.splitlines())


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_tool_arguments_nested_100000_deep_are_a_tool_error_the_model_reads_and_the_theme_is_counted(
        llm_server, tmp_path, wire):
    """They ended as "internal error: RecursionError", and the theme was left out of Table 2."""
    deep = RawJSON('{"path": "notes.md", "content": ' + "[" * 100_000 + "]" * 100_000 + "}")
    script = [Reply("", [("write_file", deep)]), Reply("", writes(FILES)), Reply("", [("finish", {"summary": "done"})])]
    done, summary, out = generate(llm_server, tmp_path, script, wire)

    assert done.returncode == 0, done.stderr[-3000:]
    assert summary["accepted"] == ["corridor"] and not summary["errors"]
    assert summary["rates"]["overall"] == 1.0  # the theme is counted in Table 2
    told = json.dumps(llm_server.requests[3]["body"])  # the request after the deep reply
    assert "error: write_file: the arguments are nested more than 100 levels deep; they were not read" in told
    (result,) = [e for e in steps(out / "corridor", "code") if "tool" in e][:1]
    assert result["error"] and "nested more than 100 levels deep" in result["result"]
    assert not (out / "corridor" / "notes.md").exists()
    if wire == "anthropic":  # sent back as a tool error, as the API marks one
        assert '"is_error": true' in told


def test_the_sandbox_copy_leaves_out_a_name_with_a_control_character_and_check_prints_it_escaped(tmp_path):
    """The same name rule on the copy's side: a folder written by another tool is checked too."""
    env = tiny_env.write_env(tmp_path / "env")
    (env / "notes\nerror: forged line.txt").write_text("x")
    done = envforge("check", env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("warning: notes\\nerror: forged line.txt: expected a regular file or folder inside the environment "
            "folder, found a name with the unprintable character '\\n'; the sandbox's copy leaves it out"
            in done.stdout.splitlines()), done.stdout
    assert not any(line.startswith("error: forged") for line in done.stdout.splitlines())


def test_dsl_corrections_resend_only_the_latest_attempt_and_at_most_40_problems(llm_server, tmp_path):
    """3,000 duplicate keys: 3,007 problems (413 KB of feedback) per attempt, four attempts."""
    bad = "```yaml\n" + "".join(f"meta: {i}\n" for i in range(3000)) + "```\n"
    llm_server.script = [Reply(replay_kit.DESIGN)] + [Reply(bad)] * 4
    themes = tmp_path / "themes.yaml"
    themes.write_text("- {name: corridor, theme: A corridor walk}\n")
    done = envforge("generate", "--themes", themes, "--out", tmp_path / "out", "--model", "openai/gpt-4o-mini",
                    "--base-url", llm_server.openai_url, "--no-cache", "--json", cwd=tmp_path, traceback_ok=True,
                    env={**{k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))},
                         "OPENAI_API_KEY": "test-key", "NO_PROXY": "127.0.0.1"})
    summary = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr[-3000:]
    assert summary["rejected"]["corridor"]["stage"] == "dsl"
    assert "config.yaml still has 3007 error(s) after 3 correction(s)" in summary["rejected"]["corridor"]["reason"]
    sizes = request_sizes(llm_server)
    # design, then four DSL requests, none holding more than one attempt (24 KB) and 40 problem lines
    assert len(sizes) == 5 and max(sizes) < 70_000, sizes
    last = llm_server.requests[-1]["body"]["messages"]
    assert sum(m["role"] == "assistant" for m in last) == 1
    assert "(2967 more problem(s) not shown)" in last[-1]["content"]
    assert "(Your 2 earlier attempt(s) and their problems are not repeated here.)" in last[-1]["content"]
