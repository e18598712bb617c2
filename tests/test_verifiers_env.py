"""envforge environments as verifiers 0.4 environments: `envforge export verifiers`, then verifiers'
own three ways of running one (its `vf-eval` command, an Env's episodes in this process, and its env
server with its client) against the loopback OpenAI-compatible server, each scored as `envforge
evaluate` scores the same scripted actions (the model's replies depend only on the step number in
the prompt)."""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="the verifiers extra is not installed (envforge-rl[verifiers])")

import envforge  # noqa: E402
from envforge.pipeline import layout  # noqa: E402
from envforge.pipeline.cli import main  # noqa: E402
from envforge.pipeline.testing.llm_server import LLMServer, Reply  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "generated_envs" / "reference"
BIN = Path(sys.executable).parent
STEP = re.compile(r"This is step (\d+) of at most")
LEVELS = 2
pytestmark = pytest.mark.slow


def crate_dock_solution() -> list[dict]:
    """The shipped shortest solution of crate_dock's level_01 (examples/), as action dicts."""
    env = envforge.open(REFERENCE / "crate_dock")
    lines = (ROOT / "examples" / "crate_dock_level_01.actions").read_text().splitlines()
    return [env.parse_action(line) for line in lines if line.strip() and not line.startswith("#")]


def walk(env_dir: Path) -> list[dict]:
    """A fixed walk over the environment's declared actions: some steps valid, some not."""
    candidates = envforge.open(env_dir).spec.actions.candidates()
    return [candidates[(7 * k + 3) % len(candidates)] for k in range(200)]


@pytest.fixture
def scripted(llm_env, monkeypatch):
    """A loopback model that answers step K of any episode with the script's K-th action, in the
    ReAct agent's <action> tags: evaluate's ReAct agent and the verifiers env read the same one."""
    server = LLMServer().start()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    def play(script: list[dict]) -> LLMServer:
        def rule(n, request):
            steps = STEP.findall(json.dumps(request["body"].get("messages", [])))
            k = int(steps[-1]) if steps else 1
            return Reply(f"Next.\n<action>{json.dumps(script[(k - 1) % len(script)])}</action>")
        server.rule = rule
        return server

    yield play
    server.stop()


def evaluate_normalized(env_dir: Path, server: LLMServer, out: Path) -> dict[str, float]:
    assert main(["evaluate", str(env_dir), "--agent", "react", "--model", "openai/gpt-4o-mini", "--base-url",
                 server.openai_url, "--max-levels", str(LEVELS), "--runs", "1", "--out", str(out)]) in (0, 1)
    rows = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert all(r["normalized"] is not None for r in rows), rows  # scored: no model or environment failure
    return {r["level"]: r["normalized"] for r in rows}


def export(env_dir: Path, out: Path, capsys) -> Path:
    assert main(["export", "verifiers", str(env_dir), "--out", str(out)]) == 0
    (project,) = out.iterdir()
    assert 'dependencies = ["envforge-rl[verifiers]' in (project / "pyproject.toml").read_text()
    printed = capsys.readouterr().out
    assert f"pip install '{ROOT}[verifiers]' {project};" in printed, printed  # this checkout: not the index
    return project


def subprocess_env(project: Path, tmp: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(project), NO_PROXY="127.0.0.1,localhost", HOME=str(tmp / "home"))


def vf_eval(project: Path, server: LLMServer, tmp: Path) -> dict[str, float]:
    """verifiers' own evaluation command (in its process) on the exported package."""
    done = subprocess.run([str(BIN / "vf-eval"), project.name, "-m", "gpt-4o-mini", "--client.base-url",
                           server.openai_url, "--client.api-key-var", "OPENAI_API_KEY", "--env.taskset.max-levels",
                           str(LEVELS), "-n", str(LEVELS), "--no-push", "--no-rich", "-o", str(tmp / "vf")],
                          cwd=tmp, env=subprocess_env(project, tmp), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (results,) = (tmp / "vf").rglob("traces.jsonl")
    return rewards([json.loads(x) for x in results.read_text().splitlines()])


def rewards(episodes: list[dict]) -> dict[str, float]:
    """Each episode's level and reward, from verifiers' own records (an error fails the test)."""
    got = {}
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        (trace,) = episode["traces"]
        assert trace["info"]["envforge_episode"]["normalized"] == trace["rewards"]["normalized"]["score"]
        got[trace["task"]["data"]["level"]] = sum(r["score"] * r["weight"] for r in trace["rewards"].values())
    return got


@pytest.fixture
def exported_module(monkeypatch):
    """Import an exported package in this process (forgotten after the test)."""
    def load(project: Path):
        monkeypatch.syspath_prepend(str(project))
        module = importlib.import_module(project.name)
        monkeypatch.delitem(sys.modules, project.name)
        return module
    return load


def in_process(module, server: LLMServer) -> dict[str, float]:
    """The package's Env playing its tasks in this process, through verifiers' API."""
    import verifiers.v1 as vf

    env = module.load_environment(max_levels=LEVELS)
    ctx = vf.ModelContext(model="gpt-4o-mini", sampling=vf.SamplingConfig(),
                          client=vf.EvalClientConfig(base_url=server.openai_url, api_key_var="OPENAI_API_KEY"))

    async def play():
        async with env.serving():
            return [await env.run_episode(task, ctx) for task in env.taskset]

    return rewards([e.model_dump(mode="json") for e in asyncio.run(play())])


SERVE = """import sys
from verifiers.v1.serve import serve_env
from verifiers.v1.utils.loaders import resolve_env_config
serve_env(max_workers=1, address=sys.argv[1], config=resolve_env_config({"taskset": {"id": sys.argv[2]}}))
"""


def env_server(module, project: Path, server: LLMServer, tmp: Path) -> dict[str, float]:
    """verifiers' env server, in a process of its own serving the package; its client sends the tasks."""
    import verifiers.v1 as vf
    from verifiers.v1.serve import EnvClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    served = subprocess.Popen([sys.executable, "-c", SERVE, address, project.name], env=subprocess_env(project, tmp))
    tasks = [task.data.model_dump(mode="json") for task in module.load_environment(max_levels=LEVELS).taskset]

    async def play():
        client = EnvClient(address)
        try:
            await client.wait_for_server_startup(timeout=300)
            config = vf.EvalClientConfig(base_url=server.openai_url, api_key_var="OPENAI_API_KEY")
            return await asyncio.gather(*[client.run(config, "gpt-4o-mini", vf.SamplingConfig(), data)
                                          for data in tasks])
        finally:
            await client.close()

    try:
        return rewards([e.model_dump(mode="json") for e in asyncio.run(play())])
    finally:
        served.terminate()
        served.wait(timeout=60)


def check(got: dict[str, float], expected: dict[str, float], how: str) -> None:
    assert set(got) == set(expected) and len(got) == LEVELS, (how, got, expected)
    for level, normalized in expected.items():
        assert got[level] == pytest.approx(normalized, abs=1e-9), (how, level, got, expected)


@pytest.mark.parametrize("name", ["crate_dock", "tide_pool", "demo"])
def test_vf_eval_rewards_equal_evaluates_normalized_rewards(name, scripted, tmp_path, request, capsys):
    """Two reference environments (crate_dock played by its shipped solution, tide_pool by a fixed
    walk) and an environment the offline demo accepted (a fixed walk)."""
    if name == "demo":
        run = request.getfixturevalue("generate_demo")
        accepted = layout.find_envs(run.out)
        assert accepted, run.stdout[-2000:]
        env_dir = accepted[0].path
    else:
        env_dir = REFERENCE / name
    server = scripted(crate_dock_solution() if name == "crate_dock" else walk(env_dir))
    expected = evaluate_normalized(env_dir, server, tmp_path / "evaluate")
    got = vf_eval(export(env_dir, tmp_path / "exported", capsys), server, tmp_path)
    check(got, expected, "vf-eval")
    if name == "crate_dock":
        assert got["levels/level_01.yaml"] == 1.0  # the shipped solution solves level_01 in both


@pytest.mark.parametrize("name", ["crate_dock", "tide_pool"])
def test_in_process_and_env_server_rewards_equal_evaluates(name, scripted, tmp_path, exported_module, capsys):
    """The same package played by verifiers in this process (what vf-eval and prime-rl's orchestrator
    run) and by its env server (what prime-rl's training runs), each scored as evaluate scores it."""
    env_dir = REFERENCE / name
    server = scripted(crate_dock_solution() if name == "crate_dock" else walk(env_dir))
    expected = evaluate_normalized(env_dir, server, tmp_path / "evaluate")
    project = export(env_dir, tmp_path / "exported", capsys)
    module = exported_module(project)
    check(in_process(module, server), expected, "in process")
    check(env_server(module, project, server, tmp_path), expected, "env server")


def test_a_level_whose_environment_fails_to_start_scores_zero_and_says_why(scripted, tmp_path, exported_module,
                                                                           capsys):
    """The environment's own failure is not the model's: the episode record names it, the reward is 0."""
    project = export(REFERENCE / "crate_dock", tmp_path / "exported", capsys)
    main_py = next(project.rglob("env_main.py"))
    main_py.write_text(main_py.read_text() + "\nraise RuntimeError('broken on import')\n")
    module = exported_module(project)
    server = scripted(crate_dock_solution())
    import verifiers.v1 as vf

    env = module.load_environment(max_levels=1)
    ctx = vf.ModelContext(model="gpt-4o-mini", sampling=vf.SamplingConfig(),
                          client=vf.EvalClientConfig(base_url=server.openai_url, api_key_var="OPENAI_API_KEY"))

    async def play():
        async with env.serving():
            return [await env.run_episode(task, ctx) for task in env.taskset]

    (episode,) = asyncio.run(play())
    (trace,) = episode.traces
    record = trace.info["envforge_episode"]
    assert record["stop_reason"] == "env_error" and "broken on import" in record["stop_detail"], record
    assert trace.rewards["normalized"].score == record["normalized"] == 0.0  # as evaluate scores env_error
    assert server.count("/chat/completions") == 0  # the model was never asked to play a broken level
