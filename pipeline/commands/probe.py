"""envforge probe ENV_DIR --kind predict|plan|change[,...] [--n 50] [--seed S] [--out FILE] [--skin NAME]

Writes derived world-model test items as JSONL (pipeline/probe): next-observation prediction among
counterfactual distractors, planning to a target checked by execution, and change detection on a
mutated copy of the dynamics. Prints how many items of each kind were made, the random-choice
baseline, and why items were dropped. Exit 0 when every kind got at least one item, else 1.

`evaluate_probes(args)` is what `envforge evaluate --probes FILE` runs: an agent on the items.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pipeline import records as files
from pipeline.errors import UserError
from pipeline.llm.cli_args import run_with_client
from pipeline.probe import (
    KINDS, ChangeOptions, Made, PlanOptions, PredictOptions, ProbeReport, make_probes, read_items, run_probes,
    score_items, write_items,
)
from pipeline.probe.agents import ModelProbeAgent
from pipeline.probe.items import ChangeItem, PlanItem, PredictItem, random_change, random_predict
from pipeline.argtypes import COUNT, SEED, add_skin_argument, out_file, whole


DESCRIPTION = """Make test items from an environment's simulator: predict (which of 4-6 observations
follows k actions; distractors from counterfactual actions and previous states; exactly one right),
plan (reach a target the planner reaches; checked by execution, efficiency vs the planner), change
(a mutated copy of the dynamics and the first step t* where observations diverge). Score agents on
them with envforge evaluate --probes FILE."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "probe", description=DESCRIPTION,
        help="derive world-model test items (predict, plan, change) from an environment")
    p.add_argument("env_dir", metavar="ENV_DIR", help="environment folder")
    p.add_argument("--kind", default="predict", help=f"comma-separated kinds among {', '.join(KINDS)}, or all "
                                                      "(default predict)")
    p.add_argument("--n", type=COUNT, default=50, help="items of each kind (default 50)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--out", type=out_file, metavar="FILE", help="JSONL file to write (default ./<env>[.<skin>].<kinds>.jsonl)")
    add_skin_argument(p)
    g = p.add_argument_group("predict")
    g.add_argument("--max-k", type=COUNT, default=PredictOptions.max_k, help="actions per item: 1..K in turn (default 3)")
    g.add_argument("--choices", type=whole(4, 6), default=PredictOptions.choices, help="candidates per item, 4-6 (default 5)")
    g.add_argument("--samples", type=COUNT, default=PredictOptions.samples,
                   help="renderings of the truth from different RNG states; items with more than one truth are "
                        "dropped (default 3)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    kinds = KINDS if args.kind == "all" else tuple(k.strip() for k in args.kind.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise UserError(f"--kind: expected some of {', '.join(KINDS)} (or all), found {args.kind!r}")
    if args.n < 1 or args.max_k < 1 or not 4 <= args.choices <= 6 or args.samples < 1:
        raise UserError("--n, --max-k, --samples: expected positive numbers; --choices: expected 4 to 6")
    made = make_probes(args.env_dir, kinds, args.n, args.seed, args.skin,
                       predict=PredictOptions(max_k=args.max_k, choices=args.choices, samples=args.samples),
                       plan=PlanOptions(), change=ChangeOptions())
    name = Path(args.env_dir).resolve().name
    out = Path(args.out or f"{name}{'.' + args.skin if args.skin else ''}.{'-'.join(kinds)}.jsonl")
    write_items(out, made.items)
    summary = summarize(made, kinds)
    if args.json:
        print(json.dumps({"out": str(out), "kinds": summary}, indent=2))
    else:
        print(f"wrote {len(made.items)} items to {out}")
        print(summary_table(name, summary))
        for kind in kinds:
            if made.dropped.get(kind):
                reasons = "; ".join(f"{n} {reason}" for reason, n in sorted(made.dropped[kind].items()))
                print(f"{kind}: dropped {reasons}")
    return 0 if all(summary[k]["items"] for k in kinds) else 1


def summarize(made: Made, kinds: tuple[str, ...]) -> dict:
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


def summary_table(env: str, summary: dict) -> str:
    lines = ["| env | kind | items | detail | random baseline |", "| --- | --- | ---: | --- | ---: |"]
    for kind, s in summary.items():
        if kind == "predict":
            detail = (f"k: {', '.join(f'{k}: {n}' for k, n in s['per_k'].items())}; "
                      f"{s['candidates']:.1f} candidates")
        elif kind == "plan":
            detail = f"planner length {s['planner_length']:.1f}"
        else:
            detail = f"t* {s['t_star']:.1f}; {', '.join(f'{k} {n}' for k, n in s['mutations'].items())}"
        lines.append(f"| {env} | {kind} | {s['items']} | {detail} | {s['random']:.3f} |")
    return "\n".join(lines)


def evaluate_probes(args) -> int:
    """`envforge evaluate --probes FILE --agent A`: A (random, oracle/planner, or a model agent) on the
    items; prints the table (or JSON with --json) and writes <out>/probes-<agent>.json and .md."""
    try:
        items = read_items(args.probes)
    except (OSError, ValueError) as e:
        raise UserError(f"--probes {args.probes}: {e}") from None
    if not items:
        raise UserError(f"--probes {args.probes}: expected probe items (envforge probe), found none")

    def finish(report: ProbeReport) -> int:
        out = Path(getattr(args, "out", None) or ".")
        out.mkdir(parents=True, exist_ok=True)
        label = report.agent.replace("/", "_").replace(" ", "_")
        files.write_json(out / f"probes-{label}.json", "probe_report", report.to_dict())
        files.write_text(out / f"probes-{label}.md", report.table() + "\n")
        print(json.dumps(report.to_dict(), indent=2) if getattr(args, "json", False) else report.table())
        return 0

    if args.agent in ("random", "oracle", "planner"):
        return finish(run_probes(items, args.agent, seed=getattr(args, "seed", 0) or 0))

    async def work(client) -> int:
        agent = ModelProbeAgent(client, getattr(args, "max_tokens", 2048), getattr(args, "temperature", None))
        return finish(await score_items(items, agent))

    return run_with_client(args, work)


def _mean(values: list) -> float:
    return sum(values) / len(values) if values else 0.0
