"""Derived world-model test items (pipeline/probe): make them from an environment (`probe`), and
score an agent on them (`evaluate_probes`, what `envforge evaluate --probes FILE` runs).
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from envforge.pipeline import records as files
from envforge.pipeline.api.evaluate import EvaluateOptions
from envforge.pipeline.api.options import ExecutorOptions, Options, group, option, skin_option
from envforge.pipeline.api.values import COUNT, SEED, out_file, whole
from envforge.pipeline.errors import UserError
from envforge.pipeline.probe import (
    KINDS,
    ChangeOptions,
    PlanOptions,
    PredictOptions,
    ProbeItems,
    ProbeReport,
    make_probes,
    read_items,
    score_items,
    write_items,
)
from envforge.pipeline.probe.agents import ModelProbeAgent, make_agent
from envforge.pipeline.probe.items import ChangeItem, PlanItem, PredictItem, random_change, random_predict
from envforge.pipeline.sandbox.outside.executor import running_on


@dataclasses.dataclass(frozen=True)
class ProbeOptions(Options):
    kind: str = option("predict", help=f"comma-separated kinds among {', '.join(KINDS)}, or all (default {{default}})")
    n: int = option(50, COUNT, help="items of each kind (default {default})")
    seed: int = option(0, SEED, help="seed of every random choice (default {default})")
    out: str | None = option(None, out_file, metavar="FILE",
                             help="JSONL file to write (default ./<env>[.<skin>].<kinds>.jsonl)")
    skin: str | None = skin_option()
    max_k: int = option(PredictOptions.max_k, COUNT, section="predict",
                        help="actions per item: 1..K in turn (default {default})")
    choices: int = option(PredictOptions.choices, whole(4, 6), section="predict",
                          help="candidates per item, 4-6 (default {default})")
    samples: int = option(PredictOptions.samples, COUNT, section="predict",
                          help="renderings of the truth from different RNG states; items with more than one truth "
                               "are dropped (default {default})")
    executor: ExecutorOptions = group(ExecutorOptions)

    def kinds(self) -> tuple[str, ...]:
        kinds = KINDS if self.kind == "all" else tuple(k.strip() for k in self.kind.split(",") if k.strip())
        unknown = [k for k in kinds if k not in KINDS]
        if unknown or not kinds:
            raise UserError(f"--kind: expected some of {', '.join(KINDS)} (or all), found {self.kind!r}")
        return kinds


@dataclasses.dataclass
class Probes:
    """What `probe` made: the items (written to `out`), and per kind a summary (`summarize`)."""

    env: str
    out: Path
    kinds: tuple[str, ...]
    items: list
    dropped: dict[str, dict[str, int]]  # kind -> reason -> count
    summary: dict


def probe(env_dir: str, options: ProbeOptions) -> Probes:
    """`options.n` items of each kind from the environment at `env_dir`, written as JSONL."""
    kinds = options.kinds()
    if options.n < 1 or options.max_k < 1 or not 4 <= options.choices <= 6 or options.samples < 1:
        raise UserError("--n, --max-k, --samples: expected positive numbers; --choices: expected 4 to 6")
    with running_on(options.executor.start()):
        made = make_probes(env_dir, kinds, options.n, options.seed, options.skin,
                           predict=PredictOptions(max_k=options.max_k, choices=options.choices,
                                                  samples=options.samples),
                           plan=PlanOptions(), change=ChangeOptions())
    name = Path(env_dir).resolve().name
    out = Path(options.out or f"{name}{'.' + options.skin if options.skin else ''}.{'-'.join(kinds)}.jsonl")
    write_items(out, made.items)
    return Probes(name, out, kinds, made.items, made.dropped, summarize(made, kinds))


def summarize(made: ProbeItems, kinds: tuple[str, ...]) -> dict:
    out = {}
    for kind in kinds:
        items = [i for i in made.items if i.kind == kind]
        entry: dict = {"items": len(items), "dropped": made.dropped.get(kind, {})}
        if kind == "predict":
            entry["per_k"] = dict(sorted(Counter(i.k for i in items if isinstance(i, PredictItem)).items()))
            entry["candidates"] = _mean([len(i.candidates) for i in items])
            entry["random"] = _mean([random_predict(i) for i in items])
        if kind == "plan":
            entry["planner_length"] = _mean([i.planner_length for i in items if isinstance(i, PlanItem)])
            entry["random"] = _mean([i.random_success for i in items if isinstance(i, PlanItem)])
        if kind == "change":
            entry["t_star"] = _mean([i.t_star for i in items if isinstance(i, ChangeItem)])
            entry["mutations"] = dict(Counter(i.mutation["kind"] for i in items if isinstance(i, ChangeItem)))
            entry["random"] = _mean([random_change(i) for i in items if isinstance(i, ChangeItem)])
        out[kind] = entry
    return out


def _mean(values: list) -> float:
    return sum(values) / len(values) if values else 0.0


def read_probe_items(path: str) -> list:
    try:
        items = read_items(path)
    except (OSError, ValueError) as e:
        raise UserError(f"--probes {path}: {e}") from None
    if not items:
        raise UserError(f"--probes {path}: expected probe items (envforge probe), found none")
    return items


def write_probe_report(report: ProbeReport, out: str | Path) -> list[Path]:
    """<out>/probes-<agent>.json and .md."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    label = report.agent.replace("/", "_").replace(" ", "_")
    written = [folder / f"probes-{label}.json", folder / f"probes-{label}.md"]
    files.write(written[0], report.record())
    files.write_text(written[1], report.table() + "\n")
    return written


NO_MODEL_AGENTS = ("random", "oracle", "planner")  # probe answerers that call no model


async def evaluate_probes(items: list, options: EvaluateOptions, client=None) -> ProbeReport:
    """`options.agent` on the probe `items`: random, oracle or planner, or (given `client`) a model
    agent with options.max_tokens and temperature."""
    if client is None and options.agent not in NO_MODEL_AGENTS:
        raise UserError(f"--agent {options.agent}: expected a model client for a model agent on probe items")
    agent = make_agent(options.agent, seed=0) if client is None else \
        ModelProbeAgent(client, options.max_tokens, options.temperature)
    with running_on(options.executor.start()):
        return await score_items(items, agent)
