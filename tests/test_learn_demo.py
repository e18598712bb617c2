"""The bundled offline demo of `envforge learn`, run as a newcomer without a key runs it:

    envforge learn generated_envs/reference/* --provider replay --methods all --iterations 2

The recording (examples/replay/learn-*, made by scripts/record_learn_demo.py with the product
itself) plays both models; everything else is real: training levels generated and certified,
episodes in the sandbox, learned agent code in the sandbox, selection, the report.
"""
from __future__ import annotations

import csv
import json
import statistics

import pytest

from envforge.learning.methods import ALL

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)


@pytest.fixture(scope="module")
def demo(learn_demo):
    """The session's one run of the learn demo (conftest.py): what it printed, and its study folder."""
    return learn_demo, learn_demo.out


def test_demo_exits_zero_and_prints_table5_with_eight_methods_and_three_upper_bounds(demo):
    done, _ = demo
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| Method | crate_dock | tide_pool | Avg. Acc |" in done.stdout
    table = done.stdout.split("| Method |", 1)[1]
    for row in ("| IO (replay/replay) |", "| *Best Selection* |", "| *Pareto Selection* |",
                "| UpperBound (best) |", "| UpperBound (pareto) |", "| UpperBound (all) |"):
        assert row in table
    for label in {m.label for m in ALL}:
        assert table.count(f"| {label} |") == 2  # once under each selection
    assert "call(s) replayed from recordings (no cost)" in done.stdout
    assert "stopped" not in done.stderr


def test_demo_report_files_hold_every_method_on_every_environment(demo):
    _, study = demo
    report = study / "report"
    rows = list(csv.DictReader((report / "table5.csv").open()))
    assert [r["kind"] for r in rows] == ["baseline"] + ["method"] * 8 + ["upper_bound"] * 3
    assert {r["method"] for r in rows if r["kind"] == "method"} == {m.name for m in ALL}
    assert all(r["crate_dock"] != "" and r["tide_pool"] != "" for r in rows)
    results = json.loads((report / "results.json").read_text())
    for method, row in results["runs"].items():
        for env, run in row.items():
            assert run["iterations_done"] == 2 and run["final"] and run["stopped"] == "", (method, env)
    bounds = results["upper_bounds"]
    assert bounds["all"]["mean"] >= max(bounds["best"]["mean"], bounds["pareto"]["mean"])
    table = (report / "table5.md").read_text()
    assert "## Environment-adaptive selection (successive halving)" in table
    assert "## Upper bound against the number of methods M" in table
    assert (report / "figure3.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_learned_agent_code_ran_in_the_sandbox_and_was_exported(demo):
    _, study = demo
    code_runs = [study / "runs" / env / m.name for env in ("crate_dock", "tide_pool") for m in ALL
                 if m.component == "agent_code"]
    evaluated_code = 0
    for run in code_runs:
        pool = json.loads((run / "pool.json").read_text())
        evaluated_code += sum(1 for c in pool["candidates"][1:] if c["status"] == "evaluated")
        learned = json.loads((run / "best" / "learned.json").read_text())
        assert learned["candidate"] == pool["final"]
        assert (run / "best" / "agent.py").is_file() == learned["agent_code"]
    assert evaluated_code >= 8


def test_avg_acc_is_the_mean_of_the_exact_scores_in_the_episode_records(demo):
    """Issue 23: Avg. Acc averaged values already rounded to 4 places (9.45 where the exact mean gives
    9.44). Each method's Avg. Acc (results.json, table5.csv) is the mean over the environments of
    its final candidate's exact mean normalized reward, read here from the test episodes' records."""
    _, study = demo
    results = json.loads((study / "report" / "results.json").read_text())
    csv_avg = {r["method"]: r["avg"] for r in csv.DictReader((study / "report" / "table5.csv").open())}
    assert results["runs"]
    for method, row in results["runs"].items():
        per_env = []
        for env in results["envs"]:
            episodes = study / "runs" / env / method / "episodes" / f"{row[env]['final']}-test" / "episodes.jsonl"
            normalized = [json.loads(line)["normalized"] for line in episodes.read_text().splitlines()]
            per_env.append(statistics.fmean(v for v in normalized if v is not None))
        exact = statistics.fmean(per_env)
        assert results["averages"][method] == pytest.approx(exact, rel=1e-12, abs=1e-12), method
        assert csv_avg[method] == f"{exact:.6g}", method
