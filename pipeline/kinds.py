"""One typed model per record kind: the shape of every file envforge writes, in one place.

A record kind is a dataclass deriving from `Record`, with its `KIND` (the `envforge.<kind>/<major>`
name) and `MAJOR` (bump it when a reader of the old shape would misread the new one). Its fields
are the record's body; `pipeline.records` stamps the format fields on write and takes them off on
read, then builds the model with `from_dict`, which checks every field against its annotation
(str, int, float, bool, list, dict, `X | None`, a nested `Shape`, `dict[str, Shape]`,
`list[Shape]`) and refuses a record that does not fit, naming the file and the field.

Two kinds of record:
  * closed (the default): envforge alone writes them (episodes, learn's files); a field this
    envforge does not know, or a missing required one, is refused — never dropped, it may be what
    determined the record;
  * open (`OPEN = True`): files other tools write too (an AutoEnv folder's level_max_rewards.json,
    a manifest.json): unknown fields are kept in `extra` and written back as they were.
`OMIT_DEFAULTS`: a field still at its default None or empty container is left out of the file.

Kinds whose bodies are not typed yet are `untyped(kind)`: their whole body is `extra`.
"""
from __future__ import annotations

import dataclasses
import math
import time
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pipeline.located import UserError

T = TypeVar("T", bound="Shape")


class RecordError(UserError):
    """A record envforge cannot read as what it expects: another kind, a newer major version, or a
    body that does not fit its model."""


class Shape:
    """A typed JSON object (a record's body, or a part of one). Subclasses are dataclasses."""

    OPEN: ClassVar[bool] = False
    OMIT_DEFAULTS: ClassVar[bool] = False

    def to_dict(self) -> dict:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if self.OMIT_DEFAULTS and _at_default(f, value):
                continue
            out[f.name] = _plain(value)
        for key, value in (getattr(self, "extra", None) or {}).items():
            out.setdefault(key, value)
        return out

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """The JSON value as this shape's dict form (a hook: a bare number may stand for an entry)."""
        return value

    @classmethod
    def from_dict(cls: type[T], data: Any, where: str = "record") -> T:
        data = cls.coerce(data)
        if not isinstance(data, dict):
            raise RecordError(f"{where}: expected a JSON object, found {_typed(data)}")
        hints = _hints(cls)
        known = {f.name: f for f in fields(cls) if f.name != "extra"}  # type: ignore[arg-type]
        unknown = [k for k in data if k not in known]
        if unknown and not cls.OPEN:
            raise RecordError(f"{where}: expected the fields of {_name(cls)}, found unknown field(s) "
                              f"{', '.join(map(str, sorted(unknown)))[:200]}; it was written by another envforge")
        missing = [n for n, f in known.items()
                   if n not in data and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise RecordError(f"{where}: expected the fields of {_name(cls)}, found no {', '.join(missing)}")
        values = {name: _conform(data[name], hints[name], f"{where}: {name}") for name in known if name in data}
        if cls.OPEN:
            values["extra"] = {k: data[k] for k in unknown}
        return cls(**values)


class Record(Shape):
    """A record kind: a whole .json file, or one line of a .jsonl file."""

    KIND: ClassVar[str] = ""
    MAJOR: ClassVar[int] = 1


def _name(cls: type) -> str:
    kind = getattr(cls, "KIND", "")
    return f"envforge.{kind}/{cls.MAJOR}" if kind else cls.__name__  # type: ignore[attr-defined]


def _at_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is None and value is None:
        return True
    return f.default_factory is not MISSING and value == f.default_factory() and not value  # type: ignore[misc]


def _plain(value: Any) -> Any:
    if isinstance(value, Shape):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _typed(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
             dict: "a JSON object", type(None): "null"}
    shown = repr(value) if isinstance(value, (int, float, bool)) and not isinstance(value, type) else ""
    return names.get(type(value), type(value).__name__) + (f" ({shown[:40]})" if shown else "")


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, Shape):
        return f"a JSON object ({hint.__name__})"
    return {str: "a string", int: "an integer", float: "a finite number", bool: "true or false", list: "a list",
            dict: "a JSON object", type(None): "null", Any: "any value"}.get(origin or hint, str(hint))


def _conform(value: Any, hint: Any, where: str) -> Any:
    """`value` (parsed JSON) as the annotation `hint` says, or a RecordError naming `where`."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _conform(value, option, where)
            except RecordError:
                continue
        raise RecordError(f"{where}: expected {_describe(hint)}, found {_typed(value)}")
    if isinstance(hint, type) and issubclass(hint, Shape):
        return hint.from_dict(value, where)
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint in (str, bool):
        if isinstance(value, hint):
            return value
    elif hint is dict or origin is dict:
        if isinstance(value, dict):
            item = args[1] if len(args) == 2 else Any
            return {k: _conform(v, item, f"{where}.{k}") for k, v in value.items()}
    elif hint is list or origin is list:
        if isinstance(value, list):
            item = args[0] if args else Any
            return [_conform(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    elif hint is type(None) and value is None:
        return None
    raise RecordError(f"{where}: expected {_describe(hint)}, found {_typed(value)}")


def now() -> str:
    """The timestamp records carry (UTC)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())


# -- manifest.json ----------------------------------------------------------------------------

@dataclass
class VerificationSummary(Shape):
    """The manifest's copy of verify's verdict."""
    OPEN = True
    accepted: bool
    stage: str | None = None
    reason: str = ""
    verified_at: str = ""
    confinement: str = ""
    extra: dict = field(default_factory=dict)


@dataclass
class DifficultyBaseline(Shape):
    """The random agent's normalized score per level (verify's reliability stage)."""
    OPEN = True
    agent: str
    episodes_per_level: int
    random_normalized: dict[str, float] = field(default_factory=dict)
    mean: float | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class Skin(Shape):
    """A skin the manifest lists (envforge reskin): its file, hash and identity check."""
    OPEN = True
    style: str
    file: str
    sha256: str
    identity: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


@dataclass
class HumanReview(Shape):
    """The decision of `envforge review accept|reject`, the earlier ones under `history`."""
    OPEN = True
    decision: str
    reason: str = ""
    at: str = ""
    pipeline: str | None = None
    history: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


@dataclass
class Packaging:
    """What generate's package stage puts into an accepted environment's manifest."""
    name: str
    theme: str
    tags: dict
    model: str | None
    seed: int | None
    stages: dict
    origin: str = "envforge generate"


@dataclass
class Manifest(Record):
    """ENV/manifest.json: what an environment is and what was done to it. Written only through
    pipeline.manifest's operations."""
    KIND = "manifest"
    OPEN = True
    OMIT_DEFAULTS = True
    name: str = ""
    theme: str | None = None
    tags: dict = field(default_factory=dict)
    origin: str | None = None
    model: str | None = None
    seed: int | None = None
    generated_at: str | None = None
    stages: dict | None = None
    cost_usd: float | None = None
    verification: VerificationSummary | None = None
    confinement: str | None = None
    difficulty_baseline: DifficultyBaseline | None = None
    skins: dict[str, Skin] = field(default_factory=dict)
    files: dict[str, str] | None = None
    human_review: HumanReview | None = None
    extra: dict = field(default_factory=dict)


# -- generate's work and rejected folders ----------------------------------------------------

@dataclass
class ThemeRecord(Record):
    """OUT/_work/NAME/theme.json: the theme a folder is made from, and where it was given."""
    KIND = "theme"
    name: str
    theme: str
    tags: dict = field(default_factory=dict)
    notes: str = ""
    where: str = ""


@dataclass
class Rejection(Record):
    """OUT/_rejected/NAME/rejection.json: the stage that rejected a theme, why, and the evidence."""
    KIND = "rejection"
    name: str
    stage: str
    reason: str
    details: dict = field(default_factory=dict)  # the Rejected's details: problems, traceback, verification
    stages: dict = field(default_factory=dict)  # the latest attempt of each stage (RunDB.stage_record)
    log_excerpt: list[str] = field(default_factory=list)
    rejected_at: str = ""


@dataclass
class ModelCall(Record):
    """A line of OUT/_work/NAME/calls.jsonl, generate's call journal: the n-th model call of a
    stage and its response (pipeline.llm.messages.Response.to_dict), written before it is used."""
    KIND = "model_call"
    stage: str
    index: int
    response: dict


# -- level_max_rewards.json -------------------------------------------------------------------

@dataclass
class LevelMaxEntry(Shape):
    """One level's max reward and how it was found (AutoEnv C.1: {"max_reward": x, ...}, or x)."""
    OPEN = True
    OMIT_DEFAULTS = True
    max_reward: float
    calculation_method: str | None = None
    notes: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def coerce(cls, value: Any) -> Any:
        return {"max_reward": value} if isinstance(value, (int, float)) and not isinstance(value, bool) else value


@dataclass
class Verification(Record):
    """ENV/verification.json: verify's verdict, each stage's figures (pipeline/verify/stages.py) and
    the options it ran with (pipeline.verify.context.Options, every setting but its progress line)."""
    KIND = "verification"
    OPEN = True  # a folder verified by an older envforge may carry fields this one no longer writes
    accepted: bool
    stage: str | None = None  # the stage that rejected it
    reason: str = ""
    stages: dict = field(default_factory=dict)  # stage -> its figures
    env_dir: str = ""
    confinement: str = ""  # the sandbox rung its workers ran on
    options: dict = field(default_factory=dict)  # empty in a file written before envforge recorded them
    verified_at: str = ""
    extra: dict = field(default_factory=dict)


@dataclass
class LevelMaxRewards(Record):
    """ENV/level_max_rewards.json in the AutoEnv C.1 shape (a shipped file may carry more)."""
    KIND = "level_max_rewards"
    OPEN = True
    environment_id: str = ""
    calculation_timestamp: str = ""
    levels: dict[str, LevelMaxEntry] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    @classmethod
    def build(cls, environment_id: str, levels: dict[str, LevelMaxEntry], methodology: str,
              timestamp: str | None = None, **summary: Any) -> "LevelMaxRewards":
        """The one builder: the entries per level key and the summary computed from them."""
        values = [e.max_reward for e in levels.values()]
        return cls(environment_id, timestamp or now(), dict(levels), {
            "total_levels": len(values),
            "average_max_reward": round(sum(values) / len(values), 4) if values else None,
            "min_max_reward": min(values, default=None),
            "max_max_reward": max(values, default=None),
            **summary,
            "methodology": methodology,
        })

    def same_levels(self, other: "LevelMaxRewards | None") -> bool:
        return other is not None and {k: e.to_dict() for k, e in self.levels.items()} == \
            {k: e.to_dict() for k, e in other.levels.items()}


# -- learn ------------------------------------------------------------------------------------

@dataclass
class TrainingLevel(Shape):
    source: str
    seed: int
    state_hash: str
    max_reward: float
    calculation_method: str


@dataclass
class IterationLevels(Record):
    """learn's levels/ENV/iteration_NN.json: the certified training levels of one iteration."""
    KIND = "training_levels"
    env: str
    iteration: int
    levels: list[TrainingLevel]


@dataclass
class LearnedAgent(Record):
    """learn's best/learned.json: which candidate was exported, and its scores."""
    KIND = "learned_agent"
    env: str
    method: str = ""  # a learned.json written by hand names only what it knows
    candidate: str = ""
    lineage: list[str] = field(default_factory=list)
    iteration: int = 0
    execution_model: str = ""
    agent_code: bool = False
    train_reward: float | None = None
    test_reward: float | None = None


@dataclass
class PoolRecord(Record):
    """A learning run's pool.json (learning.candidates.Pool): its candidates stay in their own
    dict form (Candidate.to_dict / from_dict)."""
    KIND = "pool"
    env: str
    method: str
    iterations_done: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    final: str | None = None
    stopped: str = ""
    candidates: list[dict] = field(default_factory=list)


# -- evaluate ---------------------------------------------------------------------------------

@dataclass
class EpisodeRecord(Record):
    """A line of evaluate's episodes.jsonl: one episode, identified by (env, level, run, agent,
    model), with what determined it (its provenance)."""
    KIND = "episode"
    env: str
    level: str
    run: int
    agent: str
    model: str
    split: str
    stop_reason: str
    total_reward: float
    max_reward: float | None
    normalized: float | None  # total / max, clipped at 1; None when there is no usable max
    normalized_raw: float | None  # before clipping
    clipped: bool
    normalized_note: str  # why normalized is None, or that it was clipped
    steps: int  # agent turns, format errors included
    env_steps: int
    valid_actions: int
    invalid_actions: int
    format_errors: int
    action_validity_rate: float | None  # turns that produced an action / turns
    invalid_action_rate: float | None  # invalid actions / actions sent
    error_streaks: int
    recovered_streaks: int
    recovery_rate: float | None  # error streaks followed by a valid action / error streaks
    distinct_states: int
    model_calls: int
    retries: int
    tokens_in: int
    tokens_out: int
    dollars: float
    wall_seconds: float
    stop_detail: str = ""
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the step cap ended the episode (the runtime's, or the turns of --max-steps)
    trajectory: str = ""
    tags: dict = field(default_factory=dict)  # the environment's category tags (manifest.json)
    events: dict = field(default_factory=dict)  # event name -> times emitted
    executor_retries: list = field(default_factory=list)  # why earlier plays were lost (a Ray node died)
    env_hash: str = ""  # content_hash() of the environment folder
    level_hash: str = ""  # sha256 of the level file
    settings: dict = field(default_factory=dict)  # episode limits and agent options (RunOptions.settings())
    confinement: str = ""  # the sandbox rung of the episode's worker (pipeline/sandbox/outside/capabilities.py)

    @classmethod
    def scored(cls, *, total_reward: float, max_reward: float | None, unscored: str = "", max_note: str = "",
               **rest: Any) -> "EpisodeRecord":
        """The record with its normalized reward; `unscored`: why the episode has none whatever
        its total (its environment's rewards were not finite); `max_note`: what its max reward's
        standing adds (EnvSpec.scoring_max)."""
        if unscored:
            normalized, raw, clipped, note = None, None, False, unscored
        else:
            normalized, raw, clipped, note = normalize(total_reward, max_reward, rest.get("level", ""), max_note)
        return cls(total_reward=round(total_reward, 6), max_reward=max_reward, normalized=normalized,
                   normalized_raw=raw, clipped=clipped, normalized_note=note, **rest)

    @property
    def key(self) -> tuple:
        return tuple(getattr(self, k) for k in KEY_FIELDS)


KEY_FIELDS = ("env", "level", "run", "agent", "model")


def normalize(total: float, max_reward: float | None, level: str = "",
              max_note: str = "") -> tuple[float | None, float | None, bool, str]:
    """(normalized, unclipped, clipped?, note). Normalized reward = total / the level's certified
    max reward, clipped at 1. With no max, a max that is not positive, or one that must not
    divide (unknown, a claim found wrong: `max_note` says why), it is None (never a division by
    zero, never a made-up scale) and the note says why. A max that divides but is not certified
    (a lower bound, an unchecked claim) gives a score whose note says so."""
    name = Path(level).name or "this level"
    if max_reward is None:
        return None, None, False, max_note or f"no max reward for {name} in level_max_rewards.json"
    if max_reward <= 0:
        return (
            None,
            None,
            False,
            f"the max reward of {name} is {max_reward:g}, not positive: left out of normalized scores",
        )
    raw = round(total / max_reward, 6)
    if not math.isfinite(raw):  # a total near the largest float over a max near zero
        return None, None, False, f"total {total:g} / max reward {max_reward:g} of {name} is not a finite number"
    if raw > 1:
        return (
            1.0,
            raw,
            True,
            "; ".join(
                filter(
                    None,
                    [
                        f"clipped: total {total:g} is above the {'' if max_note else 'certified '}max {max_reward:g}",
                        max_note,
                    ],
                )
            ),
        )
    return raw, raw, False, max_note


# -- kinds whose bodies are not typed yet -----------------------------------------------------

def untyped(kind: str, major: int = 1) -> type[Record]:
    """A model for a kind whose body is not typed yet: every field is kept in `extra`."""
    return dataclasses.make_dataclass(
        "".join(p.capitalize() for p in kind.split("_")) + "Record",
        [("extra", dict, field(default_factory=dict))], bases=(Record,),
        namespace={"KIND": kind, "MAJOR": major, "OPEN": True, "__doc__": f"envforge.{kind}/{major}, not typed yet"})


MODELS: tuple[type[Record], ...] = (
    Manifest,
    Verification,
    LevelMaxRewards,
    EpisodeRecord,
    IterationLevels,
    LearnedAgent,
    PoolRecord,
    ThemeRecord,
    Rejection,
    ModelCall,
    untyped("verify_report"),  # verify --out FILE
    untyped("coding_step"),  # a line of trajectory.jsonl, the coding agent's log
    untyped("trajectory"),  # a line of an episode's trajectory
    untyped("evaluate_summary"),  # evaluate's summary.json
    untyped("probe_item"),  # a line of probe's items JSONL
    untyped("probe_report"),  # probe's probes-LABEL.json
    untyped("study"),  # learn's study.json
    untyped("learn_settings"),  # the settings a learn recording was made with
    untyped("learn_results"),  # learn's report/results.json
)
