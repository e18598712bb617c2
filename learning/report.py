"""The study's report in the layout of the paper's Table 5, as Markdown and CSV, with Figure 3.

    table5.md     baseline (IO), the methods grouped by selection, UpperBound (best / pareto /
                  all), the adaptive learner next to the best single method, the upper bound
                  against the number of methods, each run's final candidate
    table5.csv    the same rows as data
    figure3.png   left: top-k gain over the baseline per method; middle: top-k incremental gain of
                  the upper bound with M methods over a single one; right: the upper bound against M
                  (matplotlib, Agg)
    results.json  every number (learning.results)
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from envforge.pipeline import records as files
from envforge.pipeline.kinds import LearnResults

TABLE_MD, TABLE_CSV, FIGURE_PNG, RESULTS_JSON = "table5.md", "table5.csv", "figure3.png", "results.json"
BOUND_LABELS = {"best": "UpperBound (best)", "pareto": "UpperBound (pareto)", "all": "UpperBound (all)"}


def write_report(folder: Path, results: LearnResults) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files.write(folder / RESULTS_JSON, results, indent=1)
    rows = table_rows(results)
    _write_csv(folder / TABLE_CSV, rows, results.envs)
    figure = figure3(folder / FIGURE_PNG, results)
    files.write_text(folder / TABLE_MD, markdown(results, rows, figure is not None))
    return [folder / TABLE_MD, folder / TABLE_CSV] + ([figure] if figure else []) + [folder / RESULTS_JSON]


def table_rows(results: LearnResults) -> list[dict]:
    """Table 5's rows: {kind, label, group, method, scores{env}, avg, cost, learning $, learning tokens}."""
    envs, runs = results.envs, results.runs
    base = results.baseline
    rows = [{"kind": "baseline", "label": f"IO ({results.execution_model})", "group": "", "method": "baseline",
             "scores": {e: base[e]["score"] for e in envs}, "avg": _mean([base[e]["score"] for e in envs]),
             "cost": _mean([base[e]["dollars"] for e in envs]), "learning_dollars": None, "learning_tokens": None}]
    for m in results.methods:
        row = runs.get(m["name"], {})
        rows.append({"kind": "method", "label": m["label"], "group": f"{m['selection'].capitalize()} Selection",
                     "method": m["name"], "scores": {e: (row.get(e) or {}).get("score") for e in envs},
                     "avg": results.averages.get(m["name"]),
                     "cost": _mean([(row.get(e) or {}).get("test_dollars") for e in envs]),
                     "learning_dollars": _mean([(row.get(e) or {}).get("learning_dollars") for e in envs]),
                     "learning_tokens": _mean([(row.get(e) or {}).get("learning_tokens") for e in envs])})
    for key, bound in results.upper_bounds.items():
        rows.append({"kind": "upper_bound", "label": BOUND_LABELS[key], "group": "", "method": key,
                     "scores": bound["per_env"], "avg": bound["mean"], "cost": None, "learning_dollars": None,
                     "learning_tokens": None})
    return rows


def markdown(results: LearnResults, rows: list[dict], with_figure: bool) -> str:
    envs, s = results.envs, results.settings
    test = f"the first {s['test_levels']}" if s["test_levels"] else "all"
    out = ["# Learning study: Table 5 layout", "",
           f"Execution model `{results.execution_model}`, optimizer `{results.optimizer_model}`; "
           f"{s['iterations']} iterations; {s['runs']} run(s) per level; {s['train_levels']} training level(s) per "
           f"iteration, fresh from the generator; test levels: {test} of each environment's levels/.", "",
           "Scores are the mean normalized reward (%) of each run's final candidate on the test levels. Cost is "
           "that test evaluation in USD per environment (the paper's Cost); Learning is what the method's search "
           "spent per environment (optimizer calls and training evaluations), in USD and tokens.", "",
           "| Method | " + " | ".join(envs) + " | Avg. Acc | Cost ($/env) | Learning ($/env) | Learning tokens/env |",
           "| --- | " + " | ".join("---:" for _ in envs) + " | ---: | ---: | ---: | ---: |"]
    group = None
    for row in rows:
        if row["group"] and row["group"] != group:
            group = row["group"]
            out.append(f"| *{group}* |" + " |" * (len(envs) + 4))
        out.append(f"| {row['label']} | " + " | ".join(_pct(row["scores"].get(e)) for e in envs)
                   + f" | {_pct(row['avg'])} | {_usd(row['cost'])} | {_usd(row['learning_dollars'])} | "
                   f"{_num(row['learning_tokens'])} |")
    out += ["", *adaptive_section(results), "", *bound_by_m_section(results)]
    if with_figure:
        out += ["", f"![Figure 3: top-k gain and the upper bound with M methods]({FIGURE_PNG})"]
    out += ["", "## Final candidates", "",
            "| Environment | Method | Final (lineage) | Iteration | Train | Test | Test ($) | Learning ($) | "
            "Learning tokens | Candidates | Rejected | Stopped |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for m in results.methods:
        for env in envs:
            r = results.runs.get(m["name"], {}).get(env)
            if r is None:
                out.append(f"| {env} | {m['name']} |" + " – |" * 9 + " not started |")
                continue
            out.append(f"| {env} | {m['name']} | {' → '.join(r['lineage']) or '–'} | {_num(r['final_iteration'])} | "
                       f"{_pct(r['train_reward'])} | {_pct(r['score'])} | {_usd(r['test_dollars'])} | "
                       f"{_usd(r['learning_dollars'])} | {_num(r['learning_tokens'])} | {r['candidates']} | "
                       f"{r['rejected']} | {r['stopped'] or '–'} |")
    return "\n".join(out) + "\n"


def adaptive_section(results: LearnResults) -> list[str]:
    a, single = results.adaptive, results.best_single
    bound = results.upper_bounds.get("all", {}).get("mean")
    gap = "–" if a["gap_closed"] is None else f"{a['gap_closed'] * 100:.1f}%"
    chosen = ", ".join(f"{env}: {c['chosen']}" for env, c in a["envs"].items())
    return ["## Environment-adaptive selection (successive halving)", "",
            "Per environment, every method starts; after each iteration the better half by best training reward "
            "so far goes on; the last one left runs to the end. Computed from the logged runs (each method's "
            "search up to an iteration does not depend on whether it continues); test levels are never used "
            "to choose.", "",
            "| Learner | Avg. Acc | Share of the upper-bound gap closed | Learning tokens/env | Learning ($/env) |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| Best single method ({single['method'] or '–'}) | {_pct(single['score'])} | 0% | "
            f"{_num(single['learning_tokens_per_env'])} | {_usd(single['learning_dollars_per_env'])} |",
            f"| Adaptive ({chosen or '–'}) | {_pct(a['score'])} | {gap} | {_num(a['tokens_per_env'])} | "
            f"{_usd(a['dollars_per_env'])} |",
            f"| UpperBound (all): every method, the best per environment | {_pct(bound)} | 100% | "
            f"{_num(a['all_methods_tokens_per_env'])} | {_usd(a['all_methods_dollars_per_env'])} |"]


def bound_by_m_section(results: LearnResults) -> list[str]:
    by_m = results.figure3["bound_by_m"]
    if not by_m:
        return []
    sizes = list(by_m)
    return ["## Upper bound against the number of methods M", "",
            "For each M, the mean over every subset of M methods of that subset's upper bound.", "",
            "| M | " + " | ".join(str(m) for m in sizes) + " |", "| --- | " + " | ".join("---:" for _ in sizes) + " |",
            "| UpperBound | " + " | ".join(_pct(by_m[m]) for m in sizes) + " |"]


def figure3(path: Path, results: LearnResults) -> Path | None:
    fig3 = results.figure3
    if not fig3["top_k_gain"] or not fig3["incremental_top_k"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right, by_m) = plt.subplots(1, 3, figsize=(17, 4.5), gridspec_kw={"width_ratios": [3, 3, 2]})
    for name, series in fig3["top_k_gain"].items():
        style = dict(color="black", linewidth=2.2) if name == "upper bound" else dict(linewidth=1.2)
        left.plot(range(1, len(series) + 1), [v * 100 for v in series], marker="o", label=name, **style)
    left.axhline(0, color="grey", linewidth=0.8)
    left.set(title="Top-k absolute performance gain (vs baseline)", xlabel="Environment count (top-k)",
             ylabel="Gain (normalized reward points)")
    for size, series in fig3["incremental_top_k"].items():
        right.plot(range(1, len(series) + 1), [v * 100 for v in series], marker="o", label=f"M={size}")
    right.set(title="Top-k incremental gain of the upper bound (vs single method)",
              xlabel="Environment count (top-k)", ylabel="Gain (normalized reward points)")
    sizes = list(fig3["bound_by_m"])
    by_m.plot(sizes, [fig3["bound_by_m"][m] * 100 for m in sizes], marker="o", color="black")
    by_m.set(title="Upper bound vs number of methods", xlabel="Number of methods M (mean over subsets)",
             ylabel="Mean normalized reward (%)")
    for ax in (left, right):
        ax.legend(fontsize=7)
    for ax in (left, right, by_m):
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    files.write_figure(path, fig, dpi=110)
    plt.close(fig)
    return path


def _write_csv(path: Path, rows: list[dict], envs: list[str]) -> None:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["kind", "group", "method", "label", *envs, "avg", "cost_usd_per_env",
                     "learning_usd_per_env", "learning_tokens_per_env"])
    for r in rows:
        writer.writerow([r["kind"], r["group"], r["method"], r["label"],
                         *(_cell(r["scores"].get(e)) for e in envs), _cell(r["avg"]), _cell(r["cost"]),
                         _cell(r["learning_dollars"]), _cell(r["learning_tokens"])])
    files.write_text(path, text.getvalue())


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _cell(value) -> str:
    return "" if value is None else f"{value:.6g}"


def _pct(value) -> str:
    return "–" if value is None else f"{value * 100:.2f}"


def _usd(value) -> str:
    return "–" if value is None else f"{value:.4f}"


def _num(value) -> str:
    return "–" if value is None else f"{value:,.0f}"
