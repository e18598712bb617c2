"""Hostile environment folders on the host side (issue 15 groups 1 and 5, issue 13 item 1).

A config that `check` reports must not make `evaluate`, `verify` or `play` crash: each command,
run as a user runs it (cli_kit.envforge), ends with one located line `file[:line]: expected …, found …`, its
usual exit code and no traceback. A linked file is never followed: the canary it points at
appears in no output and no file written.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import write_env


def alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def set_max_steps(value: str):
    def edit(env: Path) -> None:
        config = env / "config.yaml"
        config.write_text(config.read_text().replace("max_steps: 12", f"max_steps: {value}"))
    return edit


def write_config(data: bytes):
    return lambda env: (env / "config.yaml").write_bytes(data)


def link_instruction(target: str):
    def edit(env: Path) -> None:
        (env / "agent_instruction.txt").unlink(missing_ok=True)
        os.symlink(target, env / "agent_instruction.txt")
    return edit


def socket_instruction(env: Path) -> None:
    (env / "agent_instruction.txt").unlink(missing_ok=True)
    here = os.getcwd()
    os.chdir(env)  # a socket's path must be short: bind it by its name
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind("agent_instruction.txt")
    finally:
        os.chdir(here)


# case -> (edit of a sound folder, the located message every command prints)
CASES = {
    "socket_instruction": (socket_instruction, r"agent_instruction.txt: expected a regular file, found a socket"),
    "non_utf8_config": (
        write_config(b"meta:\n  id: corr\xffidor\n"),
        r"config.yaml:2: expected UTF-8 text, found byte 0xff at offset 16",
    ),
    "deep_nesting": (
        write_config(b"x: " + b"[" * 50_000 + b"]" * 50_000 + b"\n"),
        r"config.yaml:1: expected nesting at most 100 levels deep, found deeper nesting",
    ),
    "long_integer": (
        write_config(b"termination:\n  max_steps: " + b"7" * 5000 + b"\n"),
        r"config.yaml:2: expected an integer of at most 100 digits, found one of 5000 digits",
    ),
    "alias_bomb": (
        write_config(alias_bomb().encode()),
        r"config.yaml:\d+: expected at most 1000000 nodes once aliases are expanded, found more",
    ),
    "bad_manifest": (
        lambda env: (env / "manifest.json").write_text('{"tags": {"reward": "binary",}}'),
        r"manifest.json:1: expected valid JSON, found Expecting property name",
    ),
    "instruction_to_dev_zero": (
        link_instruction("/dev/zero"),
        r"agent_instruction.txt: expected a regular file inside the folder, found a symbolic link",
    ),
    "max_steps_true": (
        set_max_steps("true"),
        r"config.yaml: termination.max_steps: expected an integer of at least 1, found boolean true",
    ),
    "max_steps_string": (
        set_max_steps('"30"'),
        r"config.yaml: termination.max_steps: expected an integer of at least 1, found string '30'",
    ),
    "max_steps_negative": (
        set_max_steps("-5"),
        r"config.yaml: termination.max_steps: expected an integer of at least 1, found integer -5",
    ),
    "nan_max_reward": (
        lambda env: (env / "level_max_rewards.json").write_text('{"levels": {"level_01.yaml": {"max_reward": NaN}}}'),
        r"level_max_rewards.json: expected a finite number, found NaN",
    ),
    "tiny_max_reward": (
        lambda env: (env / "level_max_rewards.json").write_text('{"levels": {"level_01.yaml": 1e-300}}'),
        r"level_max_rewards.json: levels.level_01.yaml: expected a finite number, 0 or from 1e-06 up, found"
        r" number 1e-300",
    ),
}

# command -> (arguments after ENV_DIR, exit code for an unfit folder)
COMMANDS = {
    "check": ([], 1),
    "evaluate": (["--agent", "random", "--max-levels", "1", "--runs", "1"], 2),
    "verify": ([], 1),
    "play": (["--actions", os.devnull], 2),
}


def run(command: str, env: Path, tmp: Path) -> subprocess.CompletedProcess:
    args, _ = COMMANDS[command]
    extra = ["--out", str(tmp / "out")] if command == "evaluate" else []
    return envforge(command, str(env), *args, *extra, cwd=tmp, traceback_ok=True)  # asserted by each test


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_folder_gives_one_located_line(tmp_path, case, command):
    import re

    edit, message = CASES[case]
    env = write_env(tmp_path / "corridor")
    edit(env)
    done = run(command, env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == COMMANDS[command][1], output
    assert re.search(message, output), output
    assert "Traceback" not in output, output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_linked_instruction_is_never_read(tmp_path, command):
    canary = f"CANARY-{uuid.uuid4().hex}"
    secret = tmp_path / "secret" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text(canary + "\n")
    env = write_env(tmp_path / "corridor")
    link_instruction(str(secret))(env)
    done = run(command, env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == COMMANDS[command][1], output
    assert "agent_instruction.txt: expected a regular file inside the folder, found a symbolic link" in output, output
    assert "Traceback" not in output, output
    assert canary not in output
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink() and path != secret:
            assert canary not in path.read_text(errors="replace"), path


# -- the model never sees a linked file ------------------------------------------------------
MOVE_RIGHT = "<action>\n```python\n{'action': 'move', 'params': {'direction': 'right'}}\n```\n</action>"
# An env that shows the model whatever its folder holds under leak* (the copy should hold none).
SHOW_LEAKS = ('return f"step {omega', 'return "".join(open(n, errors="replace").read() for n in sorted(__import__("os")'
              '.listdir(".")) if n.startswith("leak")) + f"step {omega')


def react(env: Path, tmp: Path, server) -> int:
    from envforge.pipeline.cli import main

    return main(["evaluate", str(env), "--agent", "react", "--model", "openai/gpt-4o-mini", "--base-url",
                 server.openai_url, "--no-cache", "--max-levels", "1", "--runs", "1", "--max-steps", "3",
                 "--out", str(tmp / "out")])


def plant_secret(tmp_path: Path, server, monkeypatch) -> tuple[str, Path]:
    """A secret file outside the folder, and a model server that moves right every turn."""
    from envforge.pipeline.testing.llm_server import Reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server.rule = lambda n: Reply(MOVE_RIGHT)
    canary = f"CANARY-{uuid.uuid4().hex}"
    secret = tmp_path / "secret" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text(canary + "\n")
    return canary, secret


@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symlink", "hard_link"])
def test_a_linked_instruction_never_reaches_a_model_request(tmp_path, llm_server, llm_env, monkeypatch, capsys, link):
    canary, secret = plant_secret(tmp_path, llm_server, monkeypatch)
    env = write_env(tmp_path / "corridor")
    (env / "agent_instruction.txt").unlink(missing_ok=True)
    link(secret, env / "agent_instruction.txt")
    assert react(env, tmp_path, llm_server) == 2
    err = capsys.readouterr().err
    assert "agent_instruction.txt: expected " in err and "Traceback" not in err and canary not in err
    assert llm_server.requests == []  # refused before any episode


def test_links_in_the_folder_never_reach_a_model_request_or_a_record(tmp_path, llm_server, llm_env, monkeypatch,
                                                                      capsys):
    canary, secret = plant_secret(tmp_path, llm_server, monkeypatch)
    env = write_env(tmp_path / "corridor", replace={"env_main.py": SHOW_LEAKS})
    os.symlink(secret, env / "leak_symlink")  # (a hard link makes evaluate refuse the folder: see above)
    os.symlink(secret, env / "levels" / "leak.yaml")
    (env / "leak_plain").write_text("PLAIN-FILE-SHOWN")  # what the env can read, it does show
    status = react(env, tmp_path, llm_server)
    output = capsys.readouterr()
    assert status == 0, output.err
    assert "Traceback" not in output.err and canary not in output.out + output.err
    assert "PLAIN-FILE-SHOWN" in json.dumps(llm_server.requests[0]["body"])  # the model saw the env's observation
    for request in llm_server.requests:
        assert canary not in json.dumps(request["body"])
    for path in (tmp_path / "out").rglob("*"):
        assert not path.is_file() or canary.encode() not in path.read_bytes(), path


def test_a_file_or_folder_name_with_a_line_break_forges_no_line(tmp_path):
    runs = tmp_path / "envs"
    env = write_env(runs / "corridor")
    os.rename(env / "levels" / "level_02.yaml", env / "levels" / "level_02\nFAILED: forged.yaml")
    write_env(runs / "twin\nFAILED: forged twin")
    for args in (["check", str(env)], ["evaluate", str(runs), "--agent", "random", "--runs", "1", "--out",
                                       str(tmp_path / "out")]):
        done = envforge(*args, cwd=tmp_path, traceback_ok=True)  # asserted below
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        # The name may be named (escaped, on one line: a warning says it is left out), never printed raw.
        assert "Traceback" not in output, output
        assert not any(line.lstrip().startswith("FAILED") for line in output.splitlines()), output
        assert all("forged" not in line or "\\n" in line for line in output.splitlines()), output
    levels = [json.loads(x)["level"] for x in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert levels == ["levels/level_01.yaml"]  # one environment, the level with a line break left out
