"""`envforge learn` end to end with deterministic stub models: the demo's scripted model
(scripts/record_learn_demo.py) answering over the loopback server. What a user observes — exit
status, files, report rows — and the algorithm's own data, the pool JSON."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from envforge.learning.selection import best, pareto
from envforge.pipeline.cli import main
from envforge.pipeline.sandbox import Worker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from record_learn_demo import ScriptedModel  # noqa: E402

from envforge.pipeline.testing.llm_server import LLMServer  # noqa: E402

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

CRATE = ROOT / "generated_envs" / "reference" / "crate_dock"
TIDE = ROOT / "generated_envs" / "reference" / "tide_pool"
METHODS = "best-dynamics-prompt,pareto-instruction-code"
SMALL = ["--iterations", "2", "--train-levels", "2", "--test-levels", "2", "--runs", "1", "--max-steps", "8"]


@pytest.fixture(scope="module")
def scripted():
    """The loopback server answering as the scripted model; no real key or cache in reach."""
    server = LLMServer()
    server.rule = ScriptedModel().rule(server)
    server.start()
    with pytest.MonkeyPatch.context() as mp:
        for name in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ENVFORGE_MODEL", "ENVFORGE_PRICES", "ENVFORGE_DOTENV"):
            mp.delenv(name, raising=False)
        mp.setenv("OPENAI_API_KEY", "loopback-key")
        mp.setenv("ENVFORGE_RETRY_BASE_DELAY", "0.01")
        mp.setenv("NO_PROXY", "127.0.0.1,localhost")
        yield server
    server.stop()


def learn(server: LLMServer, out: Path, *args: str) -> int:
    return main(["learn", *args, "--model", "openai/gpt-5-mini", "--base-url", server.openai_url, "--no-cache",
                 "--out", str(out)])


@pytest.fixture(scope="module")
def study(scripted, tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    assert learn(scripted, out, str(CRATE), "--methods", METHODS, *SMALL) == 0
    return out


def pool(out: Path, method: str, env: str = "crate_dock") -> dict:
    return json.loads((out / "runs" / env / method / "pool.json").read_text())


def test_pool_json_keeps_every_candidates_lineage_and_a_person_can_read_it(study):
    for method, component in (("best-dynamics-prompt", "prompt"), ("pareto-instruction-code", "agent_code")):
        data = pool(study, method)
        cands = {c["id"]: c for c in data["candidates"]}
        assert data["iterations_done"] == 2 and cands["c0"]["parent"] is None and cands["c0"]["iteration"] == 0
        for c in data["candidates"][1:]:
            parent = cands[c["parent"]]
            assert parent["iteration"] < c["iteration"] and c["changed"] == component and c["analysis"]
            assert c["spent"]["calls"] >= 2  # the signal and the rewrite
        assert cands["c1"]["components"][component] != cands["c0"]["components"][component]
        folder = study / "runs" / "crate_dock" / method
        assert (folder / "candidates" / "c1" / "prompt.txt").is_file()
        assert (folder / "candidates" / "c1" / "analysis.txt").read_text() == cands["c1"]["analysis"]
        lineage = (folder / "lineage.md").read_text()
        assert f"## c1 from c0 (iteration 1): {component}" in lineage and "```diff" in lineage
    code = pool(study, "pareto-instruction-code")["candidates"][1]["components"]["agent_code"]
    assert "class Agent" in code and "LEARNED_RULES" in code


def test_training_levels_are_fresh_every_iteration_and_never_test_levels(study):
    iterations = [json.loads((study / "levels" / "crate_dock" / f"iteration_{t:02d}.json").read_text())["levels"]
                  for t in range(3)]
    seeds = [{lv["seed"] for lv in levels} for levels in iterations]
    hashes = [{lv["state_hash"] for lv in levels} for levels in iterations]
    assert all(len(s) == 2 for s in seeds) and len(set().union(*seeds)) == 6
    assert len(set().union(*hashes)) == 6  # six different levels
    with Worker(CRATE) as worker:
        held_out = {worker.call("reset", level=f"{split}/{p.name}")["state_hash"]
                    for split in ("levels", "val_levels") for p in sorted((CRATE / split).glob("*.yaml"))}
    assert not set().union(*hashes) & held_out
    assert all(lv["max_reward"] == 1.0 for levels in iterations for lv in levels)  # certified, as verify does
    for method in ("best-dynamics-prompt", "pareto-instruction-code"):
        for c in pool(study, method)["candidates"]:
            if "train" in c["evaluations"]:
                train = c["evaluations"]["train"]
                assert train["levels"] == [lv["source"] for lv in iterations[c["iteration"]]]


def test_test_levels_are_fixed_and_played_only_by_final_candidates(study):
    for method in ("best-dynamics-prompt", "pareto-instruction-code"):
        data = pool(study, method)
        tested = [c for c in data["candidates"] if "test" in c["evaluations"]]
        assert [c["id"] for c in tested] == [data["final"]]
        test = tested[0]["evaluations"]["test"]
        assert test["levels"] == ["levels/level_01.yaml", "levels/level_02.yaml"]
        rows = [json.loads(x) for x in (study / test["records"] / "episodes.jsonl").read_text().splitlines()]
        assert {(r["level"], r["split"]) for r in rows} == {("levels/level_01.yaml", "test"),
                                                             ("levels/level_02.yaml", "test")}


def test_best_selection_optimizes_the_highest_training_reward_so_far(study):
    data = pool(study, "best-dynamics-prompt")

    class C:
        def __init__(self, c):
            self.id, self.reward = c["id"], c["evaluations"]["train"]["metrics"]["reward"]
            m = c["evaluations"]["train"]["metrics"]
            self.cost = m["tokens"] / m["episodes"]

    for t in (1, 2):
        before = [C(c) for c in data["candidates"] if c["iteration"] < t and c["status"] == "evaluated"]
        parents = [c["parent"] for c in data["candidates"] if c["iteration"] == t]
        assert parents == [best(before)[0].id]
    final = max((C(c) for c in data["candidates"]), key=lambda c: c.reward)
    assert data["final"] == best([C(c) for c in data["candidates"]])[0].id and final.reward >= 0


def test_pareto_selection_optimizes_members_of_the_front(study):
    data = pool(study, "pareto-instruction-code")
    scored = [c for c in data["candidates"] if c["status"] == "evaluated"]
    for t in (1, 2):
        class C:
            def __init__(self, c):
                m = c["evaluations"]["train"]["metrics"]
                self.id, self.reward, self.cost = c["id"], m["reward"], m["tokens"] / m["episodes"]
        front = {c.id for c in pareto([C(c) for c in scored if c["iteration"] < t])}
        parents = {c["parent"] for c in data["candidates"] if c["iteration"] == t}
        assert parents and parents <= front and len(parents) <= 2


def test_report_has_table5_rows_upper_bounds_and_figure3(study):
    report = study / "report"
    table = (report / "table5.md").read_text()
    assert "| Method | crate_dock | Avg. Acc | Cost ($/env) | Learning ($/env) | Learning tokens/env |" in table
    for row in ("| IO (openai/gpt-5-mini) |", "| *Best Selection* |", "| Dynamics + Prompt |",
                "| *Pareto Selection* |", "| Instruction + Agent |", "| UpperBound (best) |",
                "| UpperBound (pareto) |", "| UpperBound (all) |", "## Environment-adaptive selection"):
        assert row in table
    results = json.loads((report / "results.json").read_text())
    scores = [results["runs"][m]["crate_dock"]["score"] for m in METHODS.split(",")]
    assert results["upper_bounds"]["all"]["per_env"]["crate_dock"] == max(scores)
    assert results["adaptive"]["envs"]["crate_dock"]["chosen"] in METHODS.split(",")
    rows = (report / "table5.csv").read_text().splitlines()
    assert rows[0].startswith("kind,group,method,label,crate_dock,avg,cost_usd_per_env")
    assert [r.split(",")[0] for r in rows[1:]] == ["baseline", "method", "method", "upper_bound", "upper_bound",
                                                   "upper_bound"]
    assert (report / "figure3.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_exported_final_candidate_runs_with_evaluate_learned(study, scripted, tmp_path, capsys):
    for method in ("best-dynamics-prompt", "pareto-instruction-code"):
        exported = study / "runs" / "crate_dock" / method / "best"
        meta = json.loads((exported / "learned.json").read_text())
        assert meta["candidate"] == pool(study, method)["final"] and meta["lineage"][0] == "c0"
        out = tmp_path / method
        status = main(["evaluate", str(CRATE), "--agent", f"learned:{exported}", "--model", "openai/gpt-5-mini",
                       "--base-url", scripted.openai_url, "--no-cache", "--max-levels", "1", "--runs", "1",
                       "--max-steps", "4", "--out", str(out)])
        assert status == 0, capsys.readouterr().err
        (record,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
        assert record["agent"] == f"learned:{exported}" and record["model_calls"] >= 1


def test_new_agent_code_that_fails_its_check_is_rewritten_with_the_failure(scripted, tmp_path):
    """The scripted model's first code for tide_pool imports subprocess: the static scan refuses it,
    the rewrite sees why, and the second version is evaluated."""
    out = tmp_path / "tide"
    first = len(scripted.requests)
    assert learn(scripted, out, str(TIDE), "--methods", "best-instruction-code", "--iterations", "1",
                 "--train-levels", "1", "--test-levels", "1", "--runs", "1", "--max-steps", "4") == 0
    (c1,) = pool(out, "best-instruction-code", "tide_pool")["candidates"][1:]
    assert c1["status"] == "evaluated" and c1["spent"]["calls"] == 3  # signal, rewrite, rewrite after the check
    retry = [r for r in scripted.requests[first:] if "failed its check" in json.dumps(r["body"])]
    assert len(retry) == 1 and "subprocess" in json.dumps(retry[0]["body"])


def test_a_budget_cap_stops_the_study_and_resume_finishes_it(scripted, tmp_path, capsys):
    out = tmp_path / "capped"
    args = [str(CRATE), "--methods", METHODS, *SMALL, "--max-tokens", "300"]
    assert learn(scripted, out, *args, "--budget-usd", "0.02") == 3  # about half of what the study costs
    err = capsys.readouterr().err
    assert "budget exceeded" in err and "re-run with the same --out to go on" in err
    stopped = [m for m in METHODS.split(",") if pool(out, m)["stopped"].startswith("budget: run: budget exceeded")]
    assert stopped and all(pool(out, m)["iterations_done"] < 2 or not pool(out, m)["final"] for m in stopped)
    assert "| IO (openai/gpt-5-mini) |" in (out / "report" / "table5.md").read_text()  # the report of what was done

    before = {m: pool(out, m) for m in METHODS.split(",") if (out / "runs" / "crate_dock" / m / "pool.json").is_file()}
    assert learn(scripted, out, "--resume") == 0
    for method in METHODS.split(","):
        data = pool(out, method)
        assert data["iterations_done"] == 2 and data["stopped"] == "" and data["final"]
        pairs = [(c["parent"], c["iteration"]) for c in data["candidates"]]
        assert len(pairs) == len(set(pairs))  # no parent optimized twice in one iteration
        assert all(c["status"] in ("evaluated", "rejected") for c in data["candidates"])
        if method in before:  # what the capped run had finished was kept as it was
            for old in before[method]["candidates"]:
                new = next(c for c in data["candidates"] if c["id"] == old["id"])
                if old["status"] == "evaluated":
                    assert new["evaluations"]["train"] == old["evaluations"]["train"]
    assert "| UpperBound (all) |" in (out / "report" / "table5.md").read_text()


def test_a_study_folder_refuses_other_settings_without_resume(study, scripted, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(study, copy)
    assert learn(scripted, copy, str(CRATE), "--methods", METHODS, *SMALL[:-2]) == 2
    assert "holds a study with other settings: pass --resume" in capsys.readouterr().err
    calls = len(scripted.requests)
    # The same study without --resume is refused too; resumed (how many episodes run at once is not
    # part of a study), nothing is left to do.
    assert learn(scripted, copy, str(CRATE), "--methods", METHODS, *SMALL) == 2
    assert "holds a study (study.json): pass --resume to continue it" in capsys.readouterr().err
    assert learn(scripted, copy, str(CRATE), "--methods", METHODS, *SMALL, "--concurrency", "2", "--resume") == 0
    assert len(scripted.requests) == calls


def test_learns_level_making_has_no_verify_budget_to_run_out(tmp_path):
    """learn has no --budget: its level searches are bounded by their own nodes and seconds, so the
    worker it makes levels in carries no deadline naming verify's flag (verify's does)."""
    from envforge.learning.evaluation import TrainingLevels
    from envforge.pipeline.envfolder.spec import EnvSpec
    from envforge.pipeline.testing.tiny_env import write_env
    from envforge.pipeline.verify.context import Context, VerifyRunOptions

    env_dir = write_env(tmp_path / "env")
    with TrainingLevels.worker(EnvSpec.open(env_dir)) as worker:
        assert worker.deadline is None
    assert "(--budget)" in Context.open(env_dir, VerifyRunOptions()).deadline[1]
