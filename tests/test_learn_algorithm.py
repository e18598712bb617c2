"""The learning algorithm's pure parts: Pareto and best selection, the upper bounds (checked on
the paper's own Table 5), the curves of Figure 3, successive halving, methods as data."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envforge.learning.adaptive import gap_closed, successive_halving
from envforge.learning.methods import ALL, Method, by_name, parse, signals
from envforge.learning.selection import SELECTIONS, best, dominates, pareto, spread
from envforge.learning.upper_bound import (
    averages,
    best_single,
    bound_by_m,
    incremental_top_k,
    per_env,
    top_k_gain,
    upper_bound,
)
from envforge.pipeline.errors import UserError


@dataclass(frozen=True, order=True)
class Point:
    name: str
    reward: float
    cost: float


points = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=14).map(
    lambda xs: [Point(f"c{i}", r / 6, float(c)) for i, (r, c) in enumerate(xs)])


@given(points)
def test_pareto_front_is_exactly_the_non_dominated_candidates(pool):
    front = pareto(pool)
    for c in front:
        assert not any(dominates(other, c) for other in pool)
    for c in pool:
        if c not in front:
            assert any(dominates(f, c) for f in front)  # whatever is left out, a front member beats


@given(points)
def test_pareto_front_does_not_depend_on_the_pool_order_and_starts_at_the_best(pool):
    assert sorted(pareto(pool)) == sorted(pareto(pool[::-1]))
    front = pareto(pool)
    assert [(-c.reward, c.cost) for c in front] == sorted((-c.reward, c.cost) for c in front)
    if pool:
        assert best(pool)[0] == front[0]


@given(points, st.integers(1, 5))
def test_spread_keeps_both_ends_of_the_front_and_at_most_k(pool, k):
    front = pareto(pool)
    picked = spread(front, k)
    assert len(picked) == min(k, len(front)) and all(c in front for c in picked)
    if front and k >= 2:
        assert picked[0] == front[0] and picked[-1] == front[-1]
    assert SELECTIONS["pareto"](pool, k) == picked


def test_best_selection_takes_the_highest_reward_then_the_cheaper_then_the_older():
    pool = [Point("c0", 0.4, 100), Point("c1", 0.7, 300), Point("c2", 0.7, 200), Point("c3", 0.7, 200)]
    assert best(pool) == [pool[2]]
    assert SELECTIONS["best"](pool, 3) == [pool[2]]
    assert best([]) == []


def test_equal_points_are_both_on_the_front():
    a, b = Point("a", 0.5, 10), Point("b", 0.5, 10)
    assert pareto([a, b]) == [a, b]


# AutoEnv Table 5 (DeepSeek-V3.1, six environments): the upper bounds must come out as printed.
ENVS = ["1-ID", "19-AS", "21-WN", "24-MM", "26-TA", "33-AD"]
TABLE5 = {
    "best-dynamics-prompt": [42.92, 34.99, 10.00, 0.00, 62.73, 81.64],
    "best-instruction-prompt": [28.58, 32.29, 20.00, 0.00, 52.27, 74.96],
    "best-dynamics-code": [37.20, 31.92, 20.00, 0.00, 81.81, 73.68],
    "best-instruction-code": [28.58, 30.53, 20.00, 0.00, 62.73, 73.70],
    "pareto-dynamics-prompt": [32.50, 32.97, 30.00, 0.00, 70.45, 64.50],
    "pareto-instruction-prompt": [38.06, 32.42, 30.00, 0.00, 88.52, 68.94],
    "pareto-dynamics-code": [30.48, 28.27, 20.00, 0.00, 62.73, 81.11],
    "pareto-instruction-code": [32.13, 32.18, 10.00, 0.00, 62.73, 62.74],
}
SCORES = {m: dict(zip(ENVS, v)) for m, v in TABLE5.items()}


def test_upper_bounds_reproduce_the_papers_table5():
    best_methods = [m for m in SCORES if m.startswith("best")]
    pareto_methods = [m for m in SCORES if m.startswith("pareto")]
    assert round(upper_bound(SCORES, best_methods), 2) == 43.56
    assert round(upper_bound(SCORES, pareto_methods), 2) == 45.11
    assert round(upper_bound(SCORES, SCORES), 2) == 46.34
    assert per_env(SCORES, SCORES) == dict(zip(ENVS, [42.92, 34.99, 30.00, 0.00, 88.52, 81.64]))
    assert round(averages(SCORES, ENVS)["best-dynamics-prompt"], 2) == 38.71
    method, score = best_single(SCORES, ENVS)
    assert method == "pareto-instruction-prompt" and round(score, 2) == 42.99  # "from 42.99% to 46.34%"


def test_a_missing_score_leaves_the_method_without_a_mean_but_not_the_bound():
    scores = {"a": {"x": 0.5, "y": None}, "b": {"x": 0.2, "y": 0.4}}
    assert averages(scores, ["x", "y"]) == {"a": None, "b": pytest.approx(0.3)}
    assert upper_bound(scores, ["a", "b"]) == pytest.approx(0.45)
    assert best_single(scores, ["x", "y"]) == ("b", pytest.approx(0.3))


def test_bound_grows_with_the_number_of_methods_from_the_mean_to_the_upper_bound():
    curve = bound_by_m(SCORES, ENVS)
    assert list(curve) == list(range(1, 9))
    assert curve[1] == pytest.approx(statistics.fmean(averages(SCORES, ENVS).values()))
    assert curve[8] == pytest.approx(upper_bound(SCORES, SCORES))
    assert all(curve[m] <= curve[m + 1] + 1e-12 for m in range(1, 8))
    increments = incremental_top_k(SCORES, ENVS)
    assert increments[1] == [0.0] * 6
    assert all(a >= b - 1e-12 for a, b in zip(increments[8], increments[8][1:]))  # top-k means fall with k


def test_top_k_gain_is_the_mean_of_the_k_largest_gains_over_the_baseline():
    baseline = dict(zip(ENVS, [28.58, 32.18, 20.00, 0.00, 62.73, 66.45]))
    curves = top_k_gain(SCORES, baseline, ENVS)
    gains = sorted((SCORES["best-dynamics-prompt"][e] - baseline[e] for e in ENVS), reverse=True)
    assert curves["best-dynamics-prompt"] == pytest.approx([statistics.fmean(gains[:k]) for k in range(1, 7)])
    assert curves["upper bound"][0] == pytest.approx(88.52 - 62.73)
    assert curves["upper bound"][-1] == pytest.approx(46.34 - 34.99, abs=0.01)


def _progress(best_train: list[float], tokens_per_iteration: int = 100) -> list[dict]:
    return [{"iteration": t + 1, "best_train": r, "tokens": tokens_per_iteration * (t + 1), "dollars": 0.01 * (t + 1)}
            for t, r in enumerate(best_train)]


def test_successive_halving_keeps_the_better_half_each_iteration_and_pays_for_what_it_ran():
    progress = {"a": _progress([0.2, 0.3, 0.3, 0.3]), "b": _progress([0.5, 0.5, 0.6, 0.6]),
                "c": _progress([0.4, 0.7, 0.7, 0.9]), "d": _progress([0.1, 0.1, 0.1, 0.1])}
    choice = successive_halving(progress, iterations=4)
    assert choice["rungs"] == [["a", "b", "c", "d"], ["b", "c"]]
    assert choice["chosen"] == "c"
    # a and d ran 1 iteration, b 2, c all 4: 1 + 1 + 2 + 4 iterations of 100 tokens
    assert choice["tokens"] == 800 and choice["dollars"] == pytest.approx(0.08)


def test_successive_halving_decides_at_the_last_iteration_and_breaks_ties_by_cost():
    progress = {"x": _progress([0.5], 300), "y": _progress([0.5], 200)}
    assert successive_halving(progress, iterations=1)["chosen"] == "y"


def test_gap_closed_is_the_share_between_best_single_and_the_upper_bound():
    assert gap_closed(0.45, 0.40, 0.50) == pytest.approx(0.5)
    assert gap_closed(0.40, 0.40, 0.40) is None


def test_the_eight_methods_are_selection_by_signal_by_component():
    assert len(ALL) == 8 and len({m.name for m in ALL}) == 8
    assert {(m.selection, m.signal, m.component) for m in ALL} == {
        (s, g, c) for s in ("best", "pareto") for g in ("dynamics", "instruction") for c in ("prompt", "agent_code")}
    assert by_name("pareto-instruction-code") == Method("pareto", "instruction", "agent_code")
    assert Method("best", "dynamics", "agent_code").label == "Dynamics + Agent"
    assert {"dynamics", "instruction"} <= set(signals())


def test_methods_come_from_names_or_a_yaml_file_and_unknown_parts_are_refused(tmp_path):
    assert parse("all") == list(ALL)
    assert [m.name for m in parse("best-dynamics-prompt, pareto-dynamics-code")] == [
        "best-dynamics-prompt", "pareto-dynamics-code"]
    spec = tmp_path / "methods.yaml"
    spec.write_text("- {selection: pareto, signal: dynamics, component: prompt}\n"
                    "- {selection: best, signal: instruction, component: agent_code}\n")
    assert [m.name for m in parse(str(spec))] == ["pareto-dynamics-prompt", "best-instruction-code"]
    with pytest.raises(UserError, match="method signal: expected one of dynamics, instruction"):
        parse("best-vibes-prompt")
    with pytest.raises(UserError, match="each once"):
        parse("best-dynamics-prompt,best-dynamics-prompt")
