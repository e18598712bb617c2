"""Learning methods as data (AutoEnv §4.2): a method is (selection, signal, component).

    selection  best | pareto                 learning/selection.py
    signal     dynamics | instruction | …    templates/learn/signal_<name>.j2: how trajectories become an analysis
    component  prompt | agent_code          what the rewrite changes

The paper's eight methods are the product of two of each (`ALL`). A new signal is a new
template file and is usable by name at once; a new method is a new triple, on the command line
(`--selection pareto --signal instruction --component agent_code`) or in a YAML file passed to
`--methods` (a list of {selection, signal, component}).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path

import yaml

from envforge.learning.candidates import COMPONENTS
from envforge.learning.selection import SELECTIONS
from envforge.pipeline.errors import UserError
from envforge.pipeline.paths import TEMPLATES_DIR

SIGNALS_DIR = TEMPLATES_DIR / "learn"
PAPER_SIGNALS = ("dynamics", "instruction")
SHORT = {"prompt": "prompt", "agent_code": "code"}
LABELS = {"prompt": "Prompt", "agent_code": "Agent"}


def signals() -> list[str]:
    """Every signal there is a template for."""
    return sorted(p.name[len("signal_"):-len(".j2")] for p in SIGNALS_DIR.glob("signal_*.j2"))


@dataclass(frozen=True)
class Method:
    selection: str
    signal: str
    component: str

    @property
    def name(self) -> str:
        return f"{self.selection}-{self.signal}-{SHORT[self.component]}"

    @property
    def label(self) -> str:
        """As in the paper's tables: "Dynamics + Prompt", under a "Best Selection" heading."""
        return f"{self.signal.capitalize()} + {LABELS[self.component]}"

    @property
    def signal_template(self) -> str:
        return f"learn/signal_{self.signal}.j2"

    def check(self) -> "Method":
        for what, value, allowed in (("selection", self.selection, sorted(SELECTIONS)),
                                     ("signal", self.signal, signals()), ("component", self.component, COMPONENTS)):
            if value not in allowed:
                raise UserError(f"method {what}: expected one of {', '.join(allowed)}, found {value!r}")
        return self


# In the order of the paper's Table 5: per selection, the prompt methods, then the agent-code ones.
ALL = tuple(Method(s, g, c) for s, c, g in product(("best", "pareto"), COMPONENTS, PAPER_SIGNALS))


def by_name(name: str) -> Method:
    for method in ALL:
        if method.name == name:
            return method
    parts = name.split("-")
    if len(parts) == 3:
        component = {v: k for k, v in SHORT.items()}.get(parts[2], parts[2])
        return Method(parts[0], parts[1], component).check()
    raise UserError(f"--methods: expected all, a YAML file or names like {ALL[0].name}, found {name!r}")


def parse(text: str) -> list[Method]:
    """`all`, a comma-separated list of names (best-dynamics-prompt, pareto-instruction-code, …),
    or a YAML file listing {selection, signal, component}."""
    if text == "all":
        return list(ALL)
    path = Path(text)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise UserError(f"--methods {text}: no such file")
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise UserError(f"{text}: expected a list of {{selection, signal, component}} mappings")
        try:
            methods = [Method(str(e["selection"]), str(e["signal"]), str(e["component"])).check() for e in entries]
        except KeyError as e:
            raise UserError(f"{text}: every method needs selection, signal and component; one has no {e}") from None
    else:
        methods = [by_name(n.strip()) for n in text.split(",") if n.strip()]
    names = [m.name for m in methods]
    if not methods or len(set(names)) != len(names):
        raise UserError(f"--methods {text}: expected at least one method, each once, found {names}")
    return methods
