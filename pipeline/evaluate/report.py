"""Aggregates of episode records and the files a person reads: report.md (Table-3 layout of the
AutoEnv paper, per-environment table, notes), per_env.png, categories.png and summary.json.

Per environment and method: the mean normalized reward of its episodes, and the standard
deviation over runs (of each run's mean over the levels; sample std, none with one run). Overall:
the mean over environments of their means, each environment weighted once, with the std over
runs of each run's mean over environments. A category column (Binary, Accum., Full, Partial,
Aligned, Inverse, from the manifest tags) is the mean over the environments that carry the tag.
Episodes that ended for a reason outside the agent (model_error, budget, env_error, invalid_reward, wall_clock) are
left out
and counted; episodes whose level has no usable max reward count for steps but not for scores.
"""
from __future__ import annotations

import json
import os
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from envforge.pipeline import records as files
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.episode import INFRASTRUCTURE, STOP_REASONS
from envforge.pipeline.kinds import BANDS, EnvSummary, EpisodeRecord, EvaluateSummary, MethodSummary

CATEGORIES = (("reward", "binary", "Binary"), ("reward", "accumulative", "Accum."),
              ("observation", "full", "Full"), ("observation", "partial", "Partial"),
              ("semantics", "aligned", "Aligned"), ("semantics", "inverse", "Inverse"))
REPORT_MD, PER_ENV_PNG, CATEGORIES_PNG, SUMMARY_JSON = "report.md", "per_env.png", "categories.png", "summary.json"
BANDS_PNG = "bands.png"


def settings_key(settings: dict) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def summarize(records: list[EpisodeRecord]) -> list[MethodSummary]:
    """One summary per (agent, model, split, settings); labels name the split when the records
    hold more than one, and number the settings when one method was run with several."""
    by_method: dict[tuple, dict[str, list[EpisodeRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_method[(r.agent, r.model, r.split, settings_key(r.settings))][r.env].append(r)
    splits = {key[2] for key in by_method}
    numbers: dict[tuple, list[str]] = defaultdict(list)  # (agent, model, split) -> settings keys in order
    for key in sorted(by_method):
        numbers[key[:3]].append(key[3])
    out = []
    for (agent, model, split, settings), envs in sorted(by_method.items()):
        summaries = {name: _env_summary(rs) for name, rs in sorted(envs.items())}
        group = [split] if len(splits) > 1 else []
        if len(numbers[(agent, model, split)]) > 1:
            group.append(f"settings {numbers[(agent, model, split)].index(settings) + 1}")
        out.append(MethodSummary(agent, model, summaries, _overall(summaries), split, json.loads(settings),
                                 ", ".join(group)))
    return out


def mixed(methods: list[MethodSummary]) -> list[str]:
    """Sentences saying that the folder holds more than one split, or one method with several settings."""
    notes = []
    splits = sorted({m.split for m in methods})
    if len(splits) > 1:
        notes.append(f"This folder holds episodes of {len(splits)} splits ({', '.join(splits)}); each is reported "
                     f"apart, labelled [split].")
    for m in methods:
        if "settings" in m.group:
            notes.append(f"{m.label}: one of several settings this method was run with here, reported apart: "
                         f"{json.dumps(m.settings, sort_keys=True)}")
    return notes


def _env_summary(records: list[EpisodeRecord]) -> EnvSummary:
    counted = [r for r in records if r.stop_reason not in INFRASTRUCTURE]
    scored = [r for r in counted if r.normalized is not None]
    per_run: dict[int, list[float]] = defaultdict(list)
    for r in scored:
        per_run[r.run].append(r.normalized)
    runs = {k: average(v) for k, v in sorted(per_run.items())}
    return EnvSummary(
        mean_normalized=average(r.normalized for r in scored),
        std=std(runs.values()),
        episodes=len(counted), scored=len(scored),
        mean_steps=average(r.steps for r in counted),
        runs=runs,
        clipped=sum(r.clipped for r in counted),
        null_normalized=len(counted) - len(scored),
        null_reasons=sorted({r.normalized_note for r in counted if r.normalized is None}),
        excluded=dict(Counter(r.stop_reason for r in records if r.stop_reason in INFRASTRUCTURE)),
        stop_reasons=dict(Counter(r.stop_reason for r in records)),
        mean_total_reward=average(r.total_reward for r in counted),
        action_validity_rate=average(r.action_validity_rate for r in counted),
        invalid_action_rate=average(r.invalid_action_rate for r in counted),
        recovery_rate=average(r.recovery_rate for r in counted),
        tokens_in=sum(r.tokens_in for r in records), tokens_out=sum(r.tokens_out for r in records),
        dollars=round(sum(r.dollars for r in records), 6),
        wall_seconds=round(sum(r.wall_seconds for r in records), 3),
        tags=next((r.tags for r in records if r.tags), {}),
        max_notes=sorted({r.normalized_note for r in scored if r.normalized_note and not r.clipped}),
        bands={band: average(r.normalized for r in scored if r.difficulty_band == band) for band in BANDS
               if any(r.difficulty_band == band for r in scored)},
    )


def _overall(envs: dict[str, EnvSummary]) -> dict:
    means = {n: s.mean_normalized for n, s in envs.items() if s.mean_normalized is not None}
    run_ids = sorted({k for s in envs.values() for k in s.runs})
    run_means = [average(s.runs[k] for s in envs.values() if k in s.runs) for k in run_ids]
    steps = [(s.mean_steps, s.episodes) for s in envs.values() if s.mean_steps is not None]
    categories = {}
    for key, value, _ in CATEGORIES:
        categories[value] = average(m for n, m in means.items() if envs[n].tags.get(key) == value)
    return {
        "mean_normalized": average(means.values()),
        "std": std(run_means),
        "environments": len(envs),
        "episodes": sum(s.episodes for s in envs.values()),
        "mean_steps": sum(m * n for m, n in steps) / sum(n for _, n in steps) if steps else None,
        "categories": categories,
        "clipped": sum(s.clipped for s in envs.values()),
        "null_normalized": sum(s.null_normalized for s in envs.values()),
        "excluded": dict(sum((Counter(s.excluded) for s in envs.values()), Counter())),
        "tokens_in": sum(s.tokens_in for s in envs.values()),
        "tokens_out": sum(s.tokens_out for s in envs.values()),
        "dollars": sum(s.dollars for s in envs.values()),
        # difficulty band -> the mean over environments of their band means (each environment once)
        "bands": {band: average(s.bands[band] for s in envs.values() if band in s.bands) for band in BANDS
                  if any(band in s.bands for s in envs.values())},
    }


# Every figure is computed from the unrounded ones (an average of rounded means drifts: learn's
# Avg. Acc read 9.45 where the exact mean is 9.44); rounding is for what is written and shown.


def average(values) -> float | None:
    """The mean of the values that are not None; None when there are none. Exact (fmean's float
    sum overflows on rewards near the largest float), so finite for finite values."""
    values = [v for v in values if v is not None]
    return float(statistics.mean(values)) if values else None


def std(values) -> float | None:
    """Sample standard deviation; None with fewer than two values, or when it is not a finite float."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    try:
        return float(statistics.stdev(values))
    except OverflowError:
        return None


# -- files ------------------------------------------------------------------------------------
def write_report(out: Path, methods: list[MethodSummary]) -> list[Path]:
    """report.md, summary.json and the two plots; returns the paths written."""
    out = Path(out)
    written = [out / REPORT_MD, out / SUMMARY_JSON]
    files.write(out / SUMMARY_JSON, EvaluateSummary(methods))
    written += plot(out, methods)
    files.write_text(out / REPORT_MD, markdown(methods, [p.name for p in written if p.suffix == ".png"]))
    return written


def table3(methods: list[MethodSummary]) -> str:
    """Rows in the layout of the AutoEnv paper's Table 3 (percentages)."""
    head = ["Method"] + [label for _, _, label in CATEGORIES] + ["Acc", "Std", "Steps"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in methods:
        o = m.overall
        cells = [m.label] + [_pct(o["categories"][value]) for _, value, _ in CATEGORIES]
        std = f"(±{o['std'] * 100:.2f})" if o["std"] is not None else "–"
        cells += [_pct(o["mean_normalized"]), std, _num(o["mean_steps"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_env_table(methods: list[MethodSummary]) -> str:
    head = ["Environment", "Tags", "Method", "Acc (±std)", "Episodes", "Steps", "Clipped", "Stop reasons"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = sorted(((name, m, s) for m in methods for name, s in m.envs.items()), key=lambda x: (x[0], x[1].label))
    for name, m, s in rows:
        acc = _pct(s.mean_normalized) + (f" (±{s.std * 100:.2f})" if s.std is not None else "")
        tags = ", ".join(s.tags.get(k, "?") for k in ("reward", "observation", "semantics")) if s.tags else "–"
        stops = ", ".join(f"{k} {v}" for k, v in sorted(s.stop_reasons.items(), key=lambda kv: -kv[1]))
        lines.append("| " + " | ".join([name, tags, m.label, acc, str(s.episodes), _num(s.mean_steps),
                                        str(s.clipped), stops]) + " |")
    return "\n".join(lines)


def band_table(methods: list[MethodSummary]) -> str:
    """Scores by difficulty band: a row per method, a column per band any level of the run is in."""
    bands = [b for b in BANDS if any(b in m.overall.get("bands", {}) for m in methods)]
    lines = ["| Method | " + " | ".join(bands) + " |", "|---|" + "---|" * len(bands)]
    for m in methods:
        lines.append(f"| {m.label} | " + " | ".join(_pct(m.overall["bands"].get(b)) for b in bands) + " |")
    return "\n".join(lines)


def markdown(methods: list[MethodSummary], images: list[str]) -> str:
    episodes = sum(s.episodes + sum(s.excluded.values()) for m in methods for s in m.envs.values())
    envs = sorted({n for m in methods for n in m.envs})
    parts = [
        "# envforge evaluation", "",
        f"{episodes} episodes, {len(methods)} method(s), {len(envs)} environment(s). Normalized reward = an episode's "
        "total reward / its level's certified max reward (level_max_rewards.json), clipped at 1; shown in percent.",
        *(f"\n**Note:** {note}" for note in mixed(methods)),
        "", "## Summary (layout of AutoEnv Table 3)", "", table3(methods), "",
        "Acc: mean normalized reward over environments (each weighted once); Std: standard deviation over runs; "
        "Steps: mean agent turns per episode. A category with no environment shows –.", "",
        "## Per environment", "", per_env_table(methods), "",
        *(["## By difficulty band", "", band_table(methods), "",
           "Mean normalized reward over the levels of each difficulty band (their profiles in "
           "level_max_rewards.json: easy 0..39, medium 40..59, hard 60..100 of the score), each environment "
           "weighted once.", ""] if any(m.overall.get("bands") for m in methods) else []),
        "## Notes", "",
    ]
    parts += _notes(methods) or ["- none"]
    parts += ["", "Stop reasons: " + "; ".join(f"`{k}` {v}" for k, v in STOP_REASONS.items()) + ".", ""]
    parts += [f"![{Path(name).stem}]({name})" for name in images]
    return "\n".join(parts) + "\n"


def _notes(methods: list[MethodSummary]) -> list[str]:
    notes = []
    for m in methods:
        for name, s in m.envs.items():
            if s.clipped:
                notes.append(f"- {m.label} on {name}: {s.clipped} episode(s) scored above the certified max reward "
                             "and were clipped at 1 (the unclipped value is in episodes.jsonl, `normalized_raw`).")
            for reason in s.null_reasons:
                notes.append(f"- {m.label} on {name}: normalized reward left empty: {reason}.")
            for note in s.max_notes[:10]:
                notes.append(f"- {m.label} on {name}: normalized reward divides by an uncertified max: {note}.")
            if s.excluded:
                what = ", ".join(f"{k} {v}" for k, v in s.excluded.items())
                notes.append(
                    f"- {m.label} on {name}: {sum(s.excluded.values())} episode(s) left out of the scores "
                    f"({what}); resuming (--resume) with the same --out retries model_error and budget episodes."
                )
    return notes


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.2f}"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


PLOTS_VARIABLE = "ENVFORGE_PLOTS"  # off: no PNG plots (drawing them costs about 2 CPU-seconds a run)


def plots_wanted() -> bool:
    value = os.environ.get(PLOTS_VARIABLE, "on").strip().lower()
    if value not in ("on", "off", "1", "0", ""):
        raise UserError(f"{PLOTS_VARIABLE}: expected on or off, found {value!r}")
    return value in ("on", "1", "")


def plot(out: Path, methods: list[MethodSummary]) -> list[Path]:
    """Per-environment bars with error bars (std over runs), and category bars, one colour per method
    (none when ENVFORGE_PLOTS=off: report.md's tables hold the same numbers)."""
    if not methods or not plots_wanted():
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({n for m in methods for n in m.envs})
    bands = [b for b in BANDS if any(b in m.overall.get("bands", {}) for m in methods)]
    groups = {
        PER_ENV_PNG: ("Normalized reward per environment (error bars: std over runs)", envs,
                      lambda m, n: (m.envs[n].mean_normalized, m.envs[n].std) if n in m.envs else (None, None)),
        CATEGORIES_PNG: ("Normalized reward per category", [label for _, _, label in CATEGORIES] + ["Avg."],
                         lambda m, label: _category_value(m, label)),
        **({BANDS_PNG: ("Normalized reward per difficulty band", bands,
                        lambda m, band: (m.overall["bands"].get(band), None))} if bands else {}),
    }
    written = []
    for filename, (title, names, value) in groups.items():
        width = 0.8 / len(methods)
        fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.9 * len(names) * len(methods) + 2)), 4.2))
        for i, m in enumerate(methods):
            pairs = [value(m, n) for n in names]
            xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(names))]
            heights = [p[0] if p[0] is not None else 0.0 for p in pairs]
            errors = [p[1] if p[1] is not None else float("nan") for p in pairs]  # nan: no error bar drawn
            ax.bar(xs, heights, width, yerr=errors, capsize=3, label=m.label)
            for x, (v, _) in zip(xs, pairs):
                if v is None:
                    ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize="x-small", rotation=90)
        ax.set_xticks(
            range(len(names)), names, rotation=20 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center"
        )
        ax.set_ylim(min(0.0, ax.get_ylim()[0]), 1.05)
        ax.set_ylabel("normalized reward")
        _fit_title(fig, ax, title)
        ax.legend(fontsize="small")
        fig.tight_layout()
        files.write_figure(out / filename, fig, dpi=110)
        plt.close(fig)
        written.append(out / filename)
    return written


def _fit_title(fig, ax, title: str) -> None:
    """The title, wrapped onto more lines where one is wider than the figure (a single agent on one
    environment draws a narrow figure, which cut it)."""
    import textwrap

    text = ax.set_title(title)
    fig.canvas.draw()
    drawn, room = text.get_window_extent().width, fig.bbox.width * 0.95
    if drawn > room:
        text.set_text("\n".join(textwrap.wrap(title, max(12, int(len(title) * room / drawn)))))


def _category_value(m: MethodSummary, label: str) -> tuple[float | None, float | None]:
    if label == "Avg.":
        return m.overall["mean_normalized"], m.overall["std"]
    value = next(v for _, v, lab in CATEGORIES if lab == label)
    return m.overall["categories"][value], None
