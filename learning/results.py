"""The numbers of a study, read from its pools: the test score and costs of every (env, method),
the baseline, the upper bounds, the adaptive learner and the curves of Figure 3 (results.json).

A method's score on an environment is its final candidate's mean normalized reward on the test
levels. Its cost ("Cost", as in the paper's Table 5) is that test evaluation's dollars; its
learning cost is what its search spent: the optimizer's calls and the training evaluations of
the candidates it made (the shared baseline c0 not included).
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from envforge.learning.adaptive import adaptive, gap_closed
from envforge.learning.candidates import POOL_JSON, Pool
from envforge.learning.layout import BASELINE, RUNS
from envforge.learning.methods import Method
from envforge.learning.settings import Settings
from envforge.learning.upper_bound import (
    averages,
    best_single,
    bound_by_m,
    incremental_top_k,
    per_env,
    top_k_gain,
    upper_bound,
)
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.kinds import LearnResults


def collect(out: Path, targets: list[EnvSpec], methods: list[Method], settings: Settings, model: str,
            optimizer: str) -> LearnResults:
    envs = [t.name for t in targets]
    baseline, rows = {}, {}
    for env in envs:
        folder = out / RUNS / env / BASELINE
        test = Pool.load(folder).get("c0").evaluations.get("test") if (folder / POOL_JSON).is_file() else None
        baseline[env] = _test_figures(test)
        for m in methods:
            folder = out / RUNS / env / m.name
            rows.setdefault(m.name, {})[env] = (
                _run_figures(Pool.load(folder)) if (folder / POOL_JSON).is_file() else None
            )
    scores = {m: {e: (r or {}).get("score") for e, r in row.items()} for m, row in rows.items()}
    base = {e: b["score"] for e, b in baseline.items()}
    bounds = {"best": [m.name for m in methods if m.selection == "best"],
              "pareto": [m.name for m in methods if m.selection == "pareto"], "all": [m.name for m in methods]}
    single, single_score = best_single(scores, envs)
    adapt = adaptive(scores, {m: {e: (r or {}).get("progress", []) for e, r in row.items()} for m, row in rows.items()},
                     envs, settings.iterations)
    ub_all = upper_bound(scores, bounds["all"])
    return LearnResults(
        envs, model, optimizer, settings.to_dict(),
        [{"name": m.name, "label": m.label, **asdict(m)} for m in methods],
        baseline, rows, averages(scores, envs),
        {k: {"per_env": per_env(scores, v), "mean": upper_bound(scores, v), "methods": v}
         for k, v in bounds.items() if v},
        {"method": single, "score": single_score,
         "learning_tokens_per_env": _mean_of(rows.get(single, {}), "learning_tokens"),
         "learning_dollars_per_env": _mean_of(rows.get(single, {}), "learning_dollars")},
        {**adapt, "gap_closed": gap_closed(adapt["score"], single_score, ub_all),
         "all_methods_tokens_per_env": sum(_mean_of(r, "learning_tokens") or 0 for r in rows.values()),
         "all_methods_dollars_per_env": sum(_mean_of(r, "learning_dollars") or 0 for r in rows.values())},
        {"top_k_gain": top_k_gain(scores, base, envs), "bound_by_m": bound_by_m(scores, envs),
         "incremental_top_k": incremental_top_k(scores, envs)})


def _test_figures(evaluation) -> dict:
    if evaluation is None:
        return {"score": None, "dollars": None, "tokens": None}
    m = evaluation.metrics
    return {"score": m.reward, "dollars": m.dollars, "tokens": m.tokens}


def _run_figures(pool: Pool) -> dict:
    final = pool.get(pool.final) if pool.final else None
    test = _test_figures(final.evaluations.get("test") if final else None)
    made = [c for c in pool.candidates if c.id != "c0"]
    progress = []
    for t in range(1, pool.iterations_done + 1):
        upto = [c for c in pool.candidates if c.iteration <= t]
        rewards = [c.reward for c in upto if c.reward is not None]
        spent = [c for c in upto if c.id != "c0"]
        progress.append({"iteration": t, "best_train": max(rewards) if rewards else None,
                         "tokens": sum(_spent(c, "tokens") for c in spent),
                         "dollars": round(sum(_spent(c, "dollars") for c in spent), 6)})
    return {"score": test["score"], "test_dollars": test["dollars"], "test_tokens": test["tokens"],
            "learning_tokens": sum(_spent(c, "tokens") for c in made),
            "learning_dollars": round(sum(_spent(c, "dollars") for c in made), 6),
            "final": pool.final, "final_iteration": final.iteration if final else None,
            "train_reward": final.reward if final else None, "candidates": len(pool.candidates),
            "rejected": sum(c.status == "rejected" for c in pool.candidates), "iterations_done": pool.iterations_done,
            "stopped": pool.stopped, "lineage": pool.lineage(pool.final) if final else [], "progress": progress}


def _spent(candidate, key: str) -> float:
    train = candidate.train
    return candidate.spent.get(key, 0) + ((train.tokens if key == "tokens" else train.dollars) if train else 0)


def _mean_of(row: dict, key: str) -> float | None:
    values = [r[key] for r in row.values() if r and r.get(key) is not None]
    return sum(values) / len(values) if values else None
