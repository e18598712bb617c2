"""envforge probe ENV_DIR --kind predict|plan|change[,...] [--n 50] [--seed S] [--out FILE] [--skin NAME]

Writes derived world-model test items as JSONL (pipeline/probe): next-observation prediction among
counterfactual distractors, planning to a target checked by execution, and change detection on a
mutated copy of the dynamics. Prints how many items of each kind were made, the random-choice
baseline, and why items were dropped. Exit 0 when every kind got at least one item, else 1.

`envforge evaluate --probes FILE` scores an agent on the items (pipeline.api.probe.evaluate_probes).
"""
from __future__ import annotations

import json

from envforge.pipeline.api.probe import ProbeOptions, probe
from envforge.pipeline.commands._flags import command, env_dir

DESCRIPTION = """Make test items from an environment's simulator: predict (which of 4-6 observations
follows k actions; distractors from counterfactual actions and previous states; exactly one right),
plan (reach a target the planner reaches; checked by execution, efficiency vs the planner), change
(a mutated copy of the dynamics and the first step t* where observations diverge). Score agents on
them with envforge evaluate --probes FILE."""


@command("probe", ProbeOptions, description=DESCRIPTION, without=["executor"],
         help="derive world-model test items (predict, plan, change) from an environment",
         arguments=[env_dir()], json="print the summary as JSON")
def run(args, options: ProbeOptions) -> int:
    made = probe(args.env_dir, options)
    if args.json:
        print(json.dumps({"out": str(made.out), "kinds": made.summary}, indent=2))
    else:
        print(f"wrote {len(made.items)} items to {made.out}")
        print(summary_table(made.env, made.summary))
        for kind in made.kinds:
            if made.dropped.get(kind):
                reasons = "; ".join(f"{n} {reason}" for reason, n in sorted(made.dropped[kind].items()))
                print(f"{kind}: dropped {reasons}")
    return 0 if all(made.summary[k]["items"] for k in made.kinds) else 1


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
