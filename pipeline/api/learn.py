"""The agent-learning study of AutoEnv §5.3 (learning/): the library call under `envforge learn`.

    job = LearnJob(["generated_envs/reference"], LearnOptions(settings=StudySettings(iterations=2)))
    outcome = await job.run(client, say=print)     # the client of job.llm

With provider replay, settings not given are those the recording was made with
(DIR/learn/settings.json, which `record` writes): a replay asks the recording's questions.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from envforge.learning import methods as method_space
from envforge.learning.candidates import COMPONENTS
from envforge.learning.layout import STUDY_JSON
from envforge.learning.selection import SELECTIONS
from envforge.learning.settings import Settings
from envforge.learning.study import open_study, run_study
from envforge.pipeline import records as files
from envforge.pipeline.api.evaluate import find_targets
from envforge.pipeline.api.options import ExecutorOptions, LLMOptions, Options, group, option
from envforge.pipeline.api.values import COUNT, LIMIT, number, one_of, out_dir
from envforge.pipeline.errors import UserError
from envforge.pipeline.kinds import LearnSettings, Study
from envforge.pipeline.llm import LLMClient
from envforge.pipeline.sandbox.outside.executor import running_on

RECORDED_SETTINGS = Path("learn") / "settings.json"  # inside a record / replay folder
METHODS = "methods: selection x signal x component"
STUDY = "study"
OPTIMIZER = "optimizer model (default: the execution model, --model)"


def setting(help: str, check: Callable[[Any], Any] = COUNT, metavar: str = "N") -> Any:
    """A study setting: None is "not given"; `{default}` in its help is learning.settings.Settings'."""
    return option(None, check, metavar=metavar, help=help)


@dataclasses.dataclass(frozen=True)
class StudySettings(Options):
    """The study's settings a call may give: None is "not given" (the recording's when replaying, else
    learning.settings.Settings' default, which the help names)."""

    SECTION = STUDY
    DEFAULTS_FROM = Settings
    iterations: int | None = setting("learning iterations per environment and method (default {default}, as in "
                                     "the paper)")
    runs: int | None = setting("runs per level, on training and test levels (default {default}, as in the paper)")
    train_levels: int | None = setting("training levels per iteration, freshly generated (default {default})")
    test_levels: int | None = setting("test levels: the first N of each environment's levels/ (default: all)")
    max_parents: int | None = setting("Pareto selection: at most N front members optimized per iteration "
                                      "(default {default})")
    concurrency: int | None = setting("episodes at once (default {default}; one at a time when recording or "
                                      "replaying)")
    max_steps: int | None = setting("turns per episode (default: the environment's termination.max_steps)", LIMIT)
    signal_episodes: int | None = setting("trajectories the signal step reads (default {default}: worst, middle, "
                                          "best)")
    max_tokens: int | None = setting("output tokens per model call (default {default})")
    temperature: float | None = setting("sampling temperature of both models (default: the provider's)",
                                        number(0.0, 2.0), "X")

    def given(self) -> dict:
        return {name: value for name, value in self.flat().items() if value is not None}


@dataclasses.dataclass(frozen=True)
class LearnOptions(Options):
    methods: str | None = option(None, metavar="WHICH", section=METHODS,
                                 help=f"all (default: the paper's eight), names such as {method_space.ALL[0].name},"
                                      f"{method_space.ALL[-1].name}, or a YAML file listing {{selection, signal, "
                                      f"component}}")
    selection: str | None = option(None, one_of(*sorted(SELECTIONS)), section=METHODS,
                                   help="one method: best or pareto")
    signal: str | None = option(None, metavar="NAME", section=METHODS,
                                help=f"one method: {' or '.join(method_space.signals())} (any "
                                     "templates/learn/signal_NAME.j2)")
    component: str | None = option(None, one_of(*COMPONENTS), section=METHODS,
                                   help="one method: what the rewrite changes")
    settings: StudySettings = group(StudySettings)
    out: str = option("runs/learn", out_dir, metavar="DIR", section=STUDY, help="study folder (default {default})")
    resume: bool = option(False, section=STUDY,
                          help="continue the study in --out as it was started (its environments, methods and "
                               "settings); without it, an --out that holds a study is refused (as generate and "
                               "evaluate refuse an --out holding a run)")
    optimizer_model: str | None = option(None, metavar="SPEC", section=OPTIMIZER,
                                         help="the model that analyzes trajectories and rewrites components")
    optimizer_base_url: str | None = option(None, metavar="URL", section=OPTIMIZER,
                                            help="its API base URL, if not --base-url")
    llm: LLMOptions = group(LLMOptions)
    executor: ExecutorOptions = group(ExecutorOptions)


def chosen_methods(options: LearnOptions) -> list[method_space.Method]:
    one = (options.selection, options.signal, options.component)
    if any(one):
        if options.methods:
            raise UserError("give either --methods or --selection/--signal/--component, not both")
        return [method_space.Method(options.selection or "best", options.signal or "dynamics",
                                    options.component or "prompt").check()]
    return method_space.parse(options.methods or "all")


class LearnJob:
    """A study, checked before anything is written (a typo must not leave a study behind)."""

    def __init__(self, env_dirs: list[str], options: LearnOptions):
        for name, value in options.settings.given().items():
            if name != "temperature" and value < (0 if name == "max_steps" else 1):
                raise UserError(f"--{name.replace('_', '-')}: expected a positive number, found {value}")
        if not options.resume and not env_dirs:
            raise UserError("expected environment folders (or --resume to continue the study in --out)")
        self.env_dirs, self.options = list(env_dirs), options
        self.out = Path(options.out)
        if options.resume and not (self.out / STUDY_JSON).is_file():  # before the provider: it is not to blame
            found = "no such folder" if not self.out.exists() else f"no {STUDY_JSON} there"
            raise UserError(f"--out {options.out}: expected a study to resume ({STUDY_JSON}, written by `envforge "
                            f"learn --out {options.out}`), found {found}; give the study's folder, or leave out "
                            f"--resume to start one")
        self.methods = chosen_methods(options)
        self.executor = options.executor.start()
        if not options.resume:
            find_targets(self.env_dirs, "test")
        # the execution model's client: model calls in flight at most the episodes at once
        self.llm = dataclasses.replace(options.llm, max_concurrency=options.llm.max_concurrency
                                       or options.settings.concurrency or Settings.concurrency)

    async def run(self, client: LLMClient, say: Callable[[str], None]):
        """The study with `client` (of `self.llm`); `say` is told its progress, a line at a time.
        Returns learning.study's outcome (`.report`, `.stopped`, `.budget`). One process at a time
        per study folder."""
        with files.locked(self.out, "learn"), running_on(self.executor):
            return await self._run(client, say)

    async def _run(self, client: LLMClient, say: Callable[[str], None]):
        settings = self._settings(client)
        optimizer = self._optimizer_client(client)
        study = open_study(self.out, Study([str(Path(p).resolve()) for p in self.env_dirs],
                                           [vars(m) for m in self.methods], settings.recorded(), client.spec,
                                           optimizer.spec), self.options.resume)
        targets = find_targets(study.envs, "test")
        methods = [method_space.Method(**m).check() for m in study.methods]
        # How many episodes run at once is not part of what the study is: it may change on every run.
        settings = Settings.from_dict({**study.settings.to_dict(), "concurrency": settings.concurrency})
        if (study.execution_model, study.optimizer_model) != (client.spec, optimizer.spec):
            raise UserError(f"{self.out}: the study uses {study.execution_model} (optimizer "
                            f"{study.optimizer_model}); found {client.spec} (optimizer {optimizer.spec})")
        sequential = any(c.config.replay_dir or c.config.record_dir for c in (client, optimizer))
        say(f"learn: {len(targets)} environment(s) x {len(methods)} method(s), {settings.iterations} iteration(s), "
            f"{settings.runs} run(s) per level, {settings.train_levels} training level(s) per iteration; "
            f"execution {client.spec}, optimizer {optimizer.spec}; study in {self.out}")
        try:
            return await run_study(self.out, targets, methods, settings, client, optimizer, sequential, say=say)
        finally:
            if optimizer is not client:
                await optimizer.aclose()

    def _settings(self, client: LLMClient) -> Settings:
        """The options given, over the recording's settings when replaying, over the defaults."""
        given = self.options.settings.given()
        recorded = {}
        replay = client.config.replay_dir
        if replay is not None and (replay / RECORDED_SETTINGS).is_file():
            recorded = files.read(replay / RECORDED_SETTINGS, LearnSettings).to_dict()
        settings = Settings.from_dict({**recorded, **given})
        if client.config.record_dir is not None:
            files.write(client.config.record_dir / RECORDED_SETTINGS, settings.recorded(), indent=1)
        return settings

    def _optimizer_client(self, client: LLMClient) -> LLMClient:
        """The optimizer's client, on the execution client's ledger (one budget, one cost summary)."""
        options = self.options
        if client.config.provider == "replay" or not (options.optimizer_model or options.optimizer_base_url):
            return client
        own = dataclasses.replace(self.llm, model=options.optimizer_model or self.llm.model,
                                  base_url=options.optimizer_base_url or self.llm.base_url)
        return own.client(ledger=client.ledger)

