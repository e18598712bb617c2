"""`envforge review html OUT_DIR`: a static site to browse a generate run, opened from disk.

index.html holds the counts in the paper's Table 2 columns and a table of every environment;
envs/<name>.html holds one environment: its errors, what the coding agent and people changed,
verification and evaluation figures with plots, level previews and every file, highlighted.
Pages are Jinja2 templates (templates/report/) with autoescape on: everything shown was written
by a model. No script, no external file: CSS is inline and plots are data: URIs.
"""
from __future__ import annotations

import functools
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2

from envforge.pipeline import difficulty
from envforge.pipeline import records as files
from envforge.pipeline.errors import UserError, not_a_folder
from envforge.pipeline.generate import stages
from envforge.pipeline.paths import TEMPLATES_DIR
from envforge.pipeline.review import plots
from envforge.pipeline.review.advice import advise
from envforge.pipeline.review.catalog import Catalog, Entry, count_labels, shorten
from envforge.pipeline.review.details import Details, gather
from envforge.pipeline.review.highlight import highlight
from envforge.pipeline.review.previews import previews

ENV_PAGES = "envs"
PREVIEW_WORKERS = 4


@functools.lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR / "report")),
                             undefined=jinja2.StrictUndefined, autoescape=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update(page_file=page_file, highlight=lambda text, name: highlight(name, text), shorten=shorten,
                       pct=_pct, num=_num)
    return env


def write_report(catalog: Catalog, site: str | Path, evaluations: list[str] = (), previews: int = 3) -> Path:
    """Write the site into `site`; returns the path of index.html."""
    root = Path(site)
    try:
        (root / ENV_PAGES).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{site}: expected a folder the report can be written to, found: {e.strerror or e}") from None
    scores = evaluation_scores(evaluations)
    entries = catalog.entries()
    with ThreadPoolExecutor(PREVIEW_WORKERS) as pool:  # each preview is a sandbox worker: run a few at once
        shown = dict(zip((e.name for e in entries),
                         pool.map(lambda e: _previews(e, previews), entries)))
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    templates = _templates()
    levels: list[int] = []  # the difficulty score of every profiled level of the run
    for entry in entries:
        details = gather(entry)
        levels += [p.score for p in details.difficulty.values()]
        page = templates.get_template("env.html.j2").render(
            **_env_page(details, shown[entry.name], scores.get(entry.name, [])), generated=generated,
            run=str(catalog.out.root))
        files.write_text(root / ENV_PAGES / page_file(entry.name), page)
    index = root / "index.html"
    files.write_text(index, templates.get_template("index.html.j2").render(
        entries=entries, table2=table2(entries), plot=_table2_plot(entries), counts=count_labels(entries),
        difficulty_plot=difficulty_histogram(f"Levels of the run by difficulty (n = {len(levels)})", levels),
        difficulty_bands=difficulty.histogram(levels) if levels else None,
        generated=generated, run=str(catalog.out.root), pages=ENV_PAGES, evaluations=list(evaluations)))
    return index


def page_file(name: str) -> str:
    """The file name of an environment's page: its name percent-quoted whole, so a name holding a
    slash or `..` (a run's database is read as found) names a file inside envs/ and nothing else."""
    return urllib.parse.quote(name, safe="") + ".html"


def table2(entries: list[Entry]) -> dict:
    """The paper's Table 2 from the pipeline's own verdicts (a human override does not count, and
    a theme a person fixed and retried is counted apart): a theme passes a column unless it was
    rejected at or before it."""
    finished = [e for e in entries if e.machine_status in ("accepted", "rejected") and not e.retried_by_hand]
    columns = stages.table2_counts([(e.machine_status == "accepted", e.stage) for e in finished])
    accepted = sum(e.machine_status == "accepted" for e in finished)
    columns["overall"] = {"passed": accepted, "stopped_here": None}
    for c in columns.values():
        c["rate"] = c["passed"] / len(finished) if finished else None
    retried = sum(e.retried_by_hand for e in entries)
    errored = [e.name for e in entries if e.status == "error" and not e.retried_by_hand]
    return {"columns": columns, "finished": len(finished), "retried_by_hand": retried, "errored": errored,
            "unfinished": len(entries) - len(finished) - retried - len(errored)}


def evaluation_scores(folders: list[str]) -> dict[str, list[dict]]:
    """Environment name -> one row per evaluated method (agent and model), from `envforge evaluate` folders."""
    if not folders:
        return {}
    from envforge.pipeline.evaluate.records import EPISODES_JSONL, Records
    from envforge.pipeline.evaluate.report import summarize

    records = []
    for folder in folders:
        if not (Path(folder) / EPISODES_JSONL).is_file():
            raise UserError(f"--evaluation {folder}: expected the output folder of `envforge evaluate` "
                            f"(with {EPISODES_JSONL}), found " + (not_a_folder(folder) if not Path(folder).is_dir()
                                                                  else f"no {EPISODES_JSONL}"))
        records += Records(folder).all()
    rows: dict[str, list[dict]] = {}
    for method in summarize(records):
        for name, s in method.envs.items():
            rows.setdefault(name, []).append({"method": method.label, "mean": s.mean_normalized, "std": s.std,
                                              "episodes": s.episodes, "steps": s.mean_steps,
                                              "stops": s.stop_reasons, "dollars": s.dollars})
    return rows


def _env_page(d: Details, shown: list, scores: list[dict]) -> dict:
    verification = d.verification or d.verification_failure
    reliability = d.figures.reliability
    per_level = reliability.per_level if reliability else {}
    level_plot = plots.bars("Reliability: mean normalized reward per level", list(per_level),
                            {"random agent": [v.random_normalized for v in per_level.values()],
                             "search planner": [v.planner_normalized for v in per_level.values()]},
                            "normalized reward") if per_level else None
    profiles = d.difficulty
    difficulty_plot = difficulty_histogram(f"Levels by difficulty (n = {len(profiles)})",
                                           [p.score for p in profiles.values()])
    eval_plot = plots.bars("Evaluation: mean normalized reward", [r["method"] for r in scores],
                           {"mean": [r["mean"] for r in scores]}, "normalized reward") if scores else None
    return {
        "d": d,
        "e": d.entry,
        "advice": advise(d),
        "verification": verification,
        "figures": d.shown_figures,
        "per_level": per_level,
        "level_plot": level_plot,
        "difficulty": {k: difficulty.line(p) for k, p in profiles.items()},
        "difficulty_plot": difficulty_plot,
        "scores": scores,
        "eval_plot": eval_plot,
        "previews": shown,
        "agent": d.agent,
        "files": d.files,
        "edits": d.edits,
        "costs": d.costs,
    }


def difficulty_histogram(title: str, scores: list[int]) -> str | None:
    """A histogram of difficulty scores in bins of ten (pipeline/difficulty.py), the bands named; None without any."""
    if not scores:
        return None
    bins = [f"{lo}-{lo + 9 if lo < 90 else 100}" for lo in range(0, 100, 10)]
    counts = [float(sum(lo <= s <= (lo + 9 if lo < 90 else 100) for s in scores)) for lo in range(0, 100, 10)]
    bands = ", ".join(f"{name} {lo}..{hi}" for name, (lo, hi) in difficulty.BANDS.items())
    return plots.bars(f"{title}; bands: {bands}", bins, {"levels": counts}, "levels", top=None)


def _previews(entry: Entry, count: int) -> list:
    return previews(Path(entry.folder), count) if entry.folder else []


def _table2_plot(entries: list[Entry]) -> str | None:
    t = table2(entries)
    if not t["finished"]:
        return None
    columns = t["columns"]
    return plots.bars(f"Themes passing each column (n = {t['finished']})", list(columns),
                      {"passed": [c["rate"] for c in columns.values()]}, "share passed", size=(5.0, 2.8))


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:g}"
    return str(value)

