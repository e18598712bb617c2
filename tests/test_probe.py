"""envforge probe on the reference environments: every item is checked again, independently,
in a fresh sandbox worker (predict: exactly one candidate is the true next observation; plan: the
planner's plan reaches the target; change: t* is the first step where observations diverge)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.probe import read_items, run_probes
from envforge.pipeline.probe.change import mutated
from envforge.pipeline.probe.items import ChangeItem, PlanItem, PredictItem, score_change
from envforge.pipeline.probe.variant_env import meets
from envforge.pipeline.sandbox.outside.client import EnvClient

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

REFERENCE = Path(__file__).resolve().parent.parent / "generated_envs" / "reference"
ENVS = ("crate_dock", "tide_pool")


def probe(env_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return envforge("probe", env_dir, *flags)


@pytest.fixture(scope="module", params=ENVS)
def made(request, tmp_path_factory):
    """Items of all three kinds from one reference env, made by the CLI."""
    out = tmp_path_factory.mktemp("probes") / f"{request.param}.jsonl"
    result = probe(REFERENCE / request.param, "--kind", "all", "--n", "8", "--seed", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr + result.stdout
    return request.param, out, result.stdout


def start(worker: EnvClient, item):
    out = worker.reset(item.start.level, item.start.seed, want_state=True)
    for action in item.start.prefix:
        out = worker.step(action, want_state=True)
    return out


def env_client(name: str):
    return EnvClient.open(EnvSpec.open(REFERENCE / name))


def test_probe_writes_every_kind_and_prints_counts_and_baselines(made):
    name, out, stdout = made
    items = read_items(out)
    assert {i.kind for i in items} == {"predict", "plan", "change"}
    assert all(len([i for i in items if i.kind == kind]) == 8 for kind in ("predict", "plan", "change"))
    assert f"| {name} | predict | 8 |" in stdout and "random baseline" in stdout
    for line in out.read_text().splitlines():  # self-contained JSON: nothing to look up elsewhere
        data = json.loads(line)
        assert data["instruction"] and data["start"]["level"]


def test_predict_items_have_exactly_one_true_candidate(made):
    name, out, _ = made
    items = [i for i in read_items(out) if isinstance(i, PredictItem)]
    assert {i.k for i in items} == {1, 2, 3}
    with env_client(name) as worker:
        for item in items:
            assert start(worker, item).observation == item.observation
            for action in item.actions:
                truth = worker.step(action).observation
            assert 4 <= len(item.candidates) <= 6 and len(item.actions) == item.k
            assert [c == truth for c in item.candidates].count(True) == 1
            assert item.candidates[item.answer] == truth
            assert len(set(item.candidates)) == len(item.candidates)
            assert item.sources[item.answer] == "truth"
            assert {"counterfactual_action", "counterfactual_state"} & set(item.sources)


def test_plan_items_are_reached_by_the_planner_plan(made):
    name, out, _ = made
    items = [i for i in read_items(out) if isinstance(i, PlanItem)]
    with env_client(name) as worker:
        for item in items:
            first = start(worker, item)
            assert first.observation == item.observation and not meets(first.raw_obs, item.target)
            for action in item.planner_plan:
                last = worker.step(action, want_state=True)
            assert meets(last.raw_obs, item.target)
            assert item.planner_length == len(item.planner_plan) >= 3
            assert 0.0 <= item.random_success <= 1.0


def test_change_items_have_the_first_divergence_as_t_star(made):
    name, out, _ = made
    items = [i for i in read_items(out) if isinstance(i, ChangeItem)]
    with env_client(name) as original:
        for item in items:
            with mutated(REFERENCE / name, item.mutation) as changed:  # a fresh copy: nothing shared with the maker
                base = [start(original, item).observation] + [original.step(a).observation for a in item.actions]
                other = [start(changed, item).observation] + [changed.step(a).observation for a in item.actions]
            assert other == item.observations
            assert base[:item.t_star] == other[:item.t_star] and base[item.t_star] != other[item.t_star]
            assert item.original_at_t_star == base[item.t_star]
            assert 1 <= item.t_star < len(item.observations) - 1  # some steps follow t*


def test_oracle_scores_everything_and_random_scores_its_baseline(made):
    _, out, _ = made
    items = read_items(out)
    oracle = run_probes(items, "oracle")
    assert all(row["score"] == 1.0 for row in oracle.rows)
    assert all(row["efficiency"] == 1.0 for row in oracle.rows if row["kind"] == "plan")
    groups = {(g["kind"], g["k"]): g for g in oracle.groups()}
    assert {("predict", 1), ("predict", 2), ("predict", 3), ("plan", "all"), ("change", "all")} <= set(groups)
    random = run_probes(items, "random", seed=1)
    assert all(row["score"] == 0.0 for row in random.rows if row["kind"] == "change" and row["t"] < row["t_star"] - 1)
    assert "| predict | all | 8 |" in random.table()


def test_random_chooser_is_near_chance_on_many_items():
    """Predict accuracy of the random agent over 400 posings of the same items, against 1/candidates."""
    items = [PredictItem(id=f"x/{i}", env="x", env_dir="", skin=None, instruction="", start=None,
                         candidates=["a", "b", "c", "d", "e"], answer=i % 5) for i in range(400)]
    report = run_probes(items, "random", seed=0)
    (group,) = [g for g in report.groups() if g["k"] == "all"]
    assert abs(group["score"] - 0.2) < 0.06 and group["random"] == pytest.approx(0.2)


def test_change_score_follows_worldtest():
    assert score_change(None, 5) == 0.0
    assert score_change(3, 5) == 0.0
    assert score_change(4, 5) == score_change(5, 5) == 1.0
    later = [score_change(t, 5) for t in range(6, 40)]
    assert all(a > b for a, b in zip(later, later[1:])) and 0.19 < later[-1] < later[0] < 1.0


def test_probe_rejects_unknown_kind_and_missing_skin(tmp_path):
    bad = probe(REFERENCE / "crate_dock", "--kind", "guess", "--out", str(tmp_path / "x.jsonl"))
    assert bad.returncode == 2 and "--kind: expected some of predict, plan, change" in bad.stderr
    bad = probe(REFERENCE / "crate_dock", "--skin", "nope", "--out", str(tmp_path / "x.jsonl"))
    assert bad.returncode == 2 and "skins/nope.py" in bad.stderr


def test_evaluate_probes_prints_the_table_and_writes_the_report(made, tmp_path, capsys):
    """What `envforge evaluate --probes FILE --agent oracle` runs."""
    from envforge.pipeline.cli import main

    name, out, _ = made
    assert main(["evaluate", "--probes", str(out), "--agent", "oracle", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert f"| {name} | plan | all | 8 | 1.000 |" in table and f"| {name} | predict | 2 |" in table
    report = json.loads((tmp_path / "probes-oracle.json").read_text())
    assert report["agent"] == "oracle" and len(report["items"]) == 24
