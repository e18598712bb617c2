"""Ctrl-C is clean (issue 23 item 3): `evaluate --agent planner` printed 4-5 tracebacks ("Task
exception was never retrieved") blaming "a CPU or memory limit"; the resume hint after an
interrupted `generate --demo` pointed into the installed package. Each test sends SIGINT once the
command is at work (a line it prints says so) and asserts what the user sees, then runs the hint
(in this process, cli_kit.envforge, but where the hint needs the model server's environment)."""
from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.testing.llm_server import Reply

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parents[1]
ENVFORGE = str(Path(sys.executable).parent / "envforge")
SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
           "OPENAI_BASE_URL", "ENVFORGE_MODEL")
NOISE = ("Traceback", "Task exception was never retrieved", "CPU or memory limit", "Exception ignored")


def interrupt_once(argv: list[str], cwd: Path, at_work: str) -> tuple[int, str]:
    """Run `envforge argv`, send SIGINT when a stderr line contains `at_work`; (exit code, stderr)."""
    proc = subprocess.Popen([ENVFORGE, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if at_work in line:
            proc.send_signal(signal.SIGINT)
            break
    seen.append(proc.stderr.read())
    proc.wait(timeout=600)
    return proc.returncode, "".join(seen)


def the_hint(stderr: str) -> list[str]:
    """The resume command the output names (generate names it twice, when interrupted and in its last
    line: the same command both times)."""
    (command,) = {part for line in stderr.splitlines() for part in line.split("`")[1:2] if "--resume" in part}
    argv = shlex.split(command)
    assert argv[0] == "envforge"
    return argv[1:]


def test_ctrl_c_in_evaluate_with_the_planner_is_one_line_and_its_hint_resumes(tmp_path):
    # 24 planner episodes (both reference envs, 4 levels each, 3 runs), enough to be at work for seconds
    argv = ["evaluate", str(ROOT / "generated_envs" / "reference"), "--agent", "planner", "--max-levels", "4",
            "--out", "ev"]
    code, stderr = interrupt_once(argv, tmp_path, "episode(s) done")
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert f"envforge evaluate: interrupted; `{shlex.join(['envforge', *argv, '--resume'])}` continues where it " \
           f"stopped" in stderr
    resumed = envforge(*the_hint(stderr), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    done = int(resumed.stdout.split(" already done")[0].rsplit(" ", 1)[1])
    assert done > 0 and "24 episode(s)" in resumed.stdout


def test_the_hint_after_ctrl_c_in_generate_demo_names_the_demo_not_its_installed_files(tmp_path):
    argv = ["generate", "--demo", "--out", "run"]
    code, stderr = interrupt_once(argv, tmp_path, "code...")
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    hint = the_hint(stderr)
    assert hint == [*argv, "--resume"] and "--themes" not in hint
    resumed = envforge(*hint, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "theme(s) accepted" in resumed.stdout


# -- issue 23 leftovers: model agents, a user's agent, learn, check, play ----------------------

def interrupt_when(argv: list[str], cwd: Path, ready, env: dict | None = None,
                   stdin: str | None = None) -> tuple[int, str]:
    """Run `envforge argv`; send SIGINT once `ready(its output so far, its pid)` is true (polled
    while it runs); (exit code, stderr). Fails when the command ended before it was ready."""
    n = len(list(cwd.glob("stderr-*")))
    out, err = cwd / f"stdout-{n}.txt", cwd / f"stderr-{n}.txt"
    with open(out, "w") as out_sink, open(err, "w") as err_sink:
        proc = subprocess.Popen([ENVFORGE, *argv], cwd=cwd, stdout=out_sink, stderr=err_sink,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, text=True,
                                env=env)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.flush()
        while not ready(out.read_text() + err.read_text(), proc.pid):
            assert proc.poll() is None, f"ended before it was at work: {out.read_text()}{err.read_text()}"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=600)
    return proc.returncode, err.read_text()


def children(pid: int) -> list[int]:
    """The processes `pid` started (its sandbox workers among them), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def model_env(tmp: Path) -> dict:
    """The environment of a command that talks to the loopback server: dummy key, no real ones."""
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env.update(OPENAI_API_KEY="test-key", NO_PROXY="127.0.0.1,localhost", ENVFORGE_CACHE=str(tmp / "cache.sqlite"),
               ENVFORGE_DOTENV=str(tmp / ".env"), ENVFORGE_RETRY_BASE_DELAY="0.01")
    return env


MOVE_TEXT = ("I will move.\n<action>\n```python\n{'action': 'move', 'params': {'direction': 'east'}}\n```\n</action>")


@pytest.mark.parametrize("agent", ["react", "tools"])
def test_ctrl_c_in_evaluate_with_a_model_agent_is_one_line_and_its_hint_resumes(tmp_path, llm_server, agent):
    """Interrupted while a model call of the second episode is in flight (the server holds that
    reply); the first episode (3 turns) is done and kept."""
    reply = (Reply(MOVE_TEXT) if agent == "react" else Reply("", tool_calls=[("move", {"direction": "east"})]))
    llm_server.rule = lambda n: dataclasses.replace(reply, delay=0.0 if n <= 3 else 3.0)
    argv = ["evaluate", str(ROOT / "generated_envs" / "reference" / "crate_dock"), "--agent", agent,
            "--model", "openai/gpt-4o-mini", "--base-url", llm_server.openai_url, "--max-levels", "2", "--runs", "1",
            "--max-steps", "3", "--concurrency", "1", "--out", "ev"]
    env = model_env(tmp_path)
    code, stderr = interrupt_when(argv, tmp_path, lambda *_: len(llm_server.requests) >= 4, env)
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert f"envforge evaluate: interrupted; `{shlex.join(['envforge', *argv, '--resume'])}` continues where it " \
           f"stopped" in stderr
    llm_server.rule = lambda n: reply
    # a process of its own: the hint runs with the model server's environment (its dummy key)
    resumed = subprocess.run([ENVFORGE, *the_hint(stderr)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=900, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 already done" in resumed.stdout + resumed.stderr and "2 episode(s)" in resumed.stdout


def test_ctrl_c_in_evaluate_with_a_users_agent_does_not_wait_for_it_and_its_hint_resumes(tmp_path):
    """The user's `run` is on a thread of its own: Ctrl-C must not wait for it to return."""
    agent = tmp_path / "stubborn.py"
    agent.write_text(
        "import sys, time\n"
        "def run(env, env_info):\n"
        "    env.reset(mode='load', world_id=env_info['world_id'])\n"
        "    print('my agent is at work', file=sys.stderr, flush=True)\n"
        "    while True:\n"
        "        time.sleep(0.05)\n")
    argv = ["evaluate", str(ROOT / "generated_envs" / "reference" / "crate_dock"), "--agent", f"{agent}:run",
            "--max-levels", "1", "--runs", "1", "--out", "ev"]
    code, stderr = interrupt_when(argv, tmp_path, lambda text, _: "my agent is at work" in text)
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert f"envforge evaluate: interrupted; `{shlex.join(['envforge', *argv, '--resume'])}` continues where it " \
           f"stopped" in stderr
    agent.write_text(  # the user fixed their agent; the hint runs the episode again
        "def run(env, env_info):\n"
        "    env.reset(mode='load', world_id=env_info['world_id'])\n"
        "    while not env.done():\n"
        "        env.step({'action': 'move', 'params': {'direction': 'up'}})\n")
    resumed = envforge(*the_hint(stderr), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 episode(s) planned, 0 already done, 1 to run now" in resumed.stderr


def test_ctrl_c_in_learn_is_one_line_and_its_hint_finishes_the_study(tmp_path):
    # one environment, one method, one iteration on the learn demo's replayed calls: its baseline's
    # pool.json comes seconds before the method's iteration and the test levels are done
    argv = ["learn", str(ROOT / "generated_envs" / "reference" / "crate_dock"), "--provider", "replay", "--methods",
            "best-dynamics-prompt", "--iterations", "1", "--out", "study"]
    code, stderr = interrupt_when(argv, tmp_path, lambda *_: (tmp_path / "study" / "runs").is_dir()
                                  and any((tmp_path / "study" / "runs").rglob("pool.json")))
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert f"envforge learn: interrupted; `{shlex.join(['envforge', *argv, '--resume'])}` continues where it " \
           f"stopped" in stderr
    resumed = envforge(*the_hint(stderr), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "study" / "report" / "table5.md").is_file()


def test_ctrl_c_in_check_is_one_line_without_blame(tmp_path):
    argv = ["check", str(ROOT / "generated_envs" / "reference" / "tide_pool")]
    code, stderr = interrupt_when(argv, tmp_path, lambda _, pid: bool(children(pid)))  # a sandbox worker is up
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert stderr.strip().splitlines()[-1] == "envforge check: interrupted"


def test_ctrl_c_in_play_at_its_prompt_is_one_line(tmp_path):
    argv = ["play", str(ROOT / "generated_envs" / "reference" / "crate_dock")]
    code, stderr = interrupt_when(argv, tmp_path, lambda text, _: "Type an action" in text, stdin="?\n")
    assert code == 130, stderr
    assert not [n for n in NOISE if n in stderr], stderr
    assert stderr.strip().splitlines()[-1] == "envforge play: interrupted"
