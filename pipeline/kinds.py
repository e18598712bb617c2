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
  * open (`KeepsUnknown` among its bases): files other tools write too (an AutoEnv folder's level_max_rewards.json,
    a manifest.json): unknown fields are kept in `extra` and written back as they were.
`OMIT_DEFAULTS`: a field still at its default None or empty container is left out of the file;
`OMIT_NONE`: only a field at its default None is (an optional figure that was never set).

A kind whose records come in several shapes (a trajectory's header, turns and end; a probe's
predict, plan and change items; the coding agent's replies and tool results) is a base model
naming the field that tells them apart (`TAG`), and a subclass per shape with its value
(`TAG_VALUE`): reading as the base builds the shape the record names, and a record naming none of
them is refused.
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

from envforge.pipeline.located import UserError

T = TypeVar("T", bound="Shape")


class RecordError(UserError):
    """A record envforge cannot read as what it expects: another kind, a newer major version, or a
    body that does not fit its model."""


class Shape:
    """A typed JSON object (a record's body, or a part of one). Subclasses are dataclasses."""

    OPEN: ClassVar[bool] = False
    OMIT_DEFAULTS: ClassVar[bool] = False
    OMIT_NONE: ClassVar[bool] = False
    TAG: ClassVar[str] = ""  # the field naming which of a kind's shapes a record is (see the module docstring)
    TAG_VALUE: ClassVar[str] = ""

    def to_dict(self) -> dict:
        out: dict[str, Any] = {self.TAG: self.TAG_VALUE} if self.TAG_VALUE else {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if self.OMIT_DEFAULTS and _at_default(f, value) or self.OMIT_NONE and value is None and f.default is None:
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
        if cls.TAG:
            shapes = {sub.TAG_VALUE: sub for sub in _subclasses(cls) if sub.TAG_VALUE}
            found = data.get(cls.TAG)
            if found not in shapes:
                raise RecordError(f"{where}: expected {cls.TAG} {' or '.join(map(repr, shapes))}, found "
                                  f"{_typed(found) if not isinstance(found, str) else repr(found[:40])}")
            if shapes[found] is not cls:
                return shapes[found].from_dict(data, where)
            data = {k: v for k, v in data.items() if k != cls.TAG}
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


@dataclass
class KeepsUnknown:
    """Makes a shape open (the module docstring): unknown fields are kept in `extra` and written back
    as they were. Listed first among a model's bases, so its OPEN wins over Shape's."""

    OPEN: ClassVar[bool] = True
    extra: dict = field(default_factory=dict, kw_only=True)


class Record(Shape):
    """A record kind: a whole .json file, or one line of a .jsonl file."""

    KIND: ClassVar[str] = ""
    MAJOR: ClassVar[int] = 1


def _name(cls: type) -> str:
    kind = getattr(cls, "KIND", "")
    return f"envforge.{kind}/{cls.MAJOR}" if kind else cls.__name__  # type: ignore[attr-defined]


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out


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
        options = [a for a in args if a is not type(None)]
        if len(options) == 1 and (isinstance(options[0], type) and issubclass(options[0], Shape)
                                  or typing.get_origin(options[0]) in (dict, list)
                                  and isinstance(value, typing.get_origin(options[0]))):
            return _conform(value, options[0], where)  # a nested object: which of its fields does not fit
        for option in options:
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
            key, item = args if len(args) == 2 else (str, Any)
            return {_key(k, key, where): _conform(v, item, f"{where}.{k}") for k, v in value.items()}
    elif hint is list or origin is list:
        if isinstance(value, list):
            item = args[0] if args else Any
            return [_conform(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    elif hint is type(None) and value is None:
        return None
    raise RecordError(f"{where}: expected {_describe(hint)}, found {_typed(value)}")


def _key(key: str, hint: Any, where: str) -> Any:
    """A JSON object's key as the annotation says: a string, or an integer written as one (a run number)."""
    if hint is int:
        try:
            return int(key)
        except ValueError:
            raise RecordError(f"{where}: expected integer keys, found {key[:40]!r}") from None
    return key


def now() -> str:
    """The timestamp records carry (UTC)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())


# -- manifest.json ----------------------------------------------------------------------------

@dataclass
class VerificationSummary(KeepsUnknown, Shape):
    """The manifest's copy of verify's verdict."""
    accepted: bool
    stage: str | None = None
    reason: str = ""
    verified_at: str = ""
    confinement: str = ""
    runs_as: str = ""  # the uid its environment code ran as (capabilities.runs_as)


@dataclass
class DifficultyBaseline(KeepsUnknown, Shape):
    """The random agent's normalized score per level (verify's reliability stage)."""
    agent: str
    episodes_per_level: int
    random_normalized: dict[str, float] = field(default_factory=dict)
    mean: float | None = None


@dataclass
class Skin(KeepsUnknown, Shape):
    """A skin the manifest lists (envforge reskin): its file, hash and identity check."""
    style: str
    file: str
    sha256: str
    identity: dict = field(default_factory=dict)


@dataclass
class HumanReview(KeepsUnknown, Shape):
    """The decision of `envforge review accept|reject`, the earlier ones under `history`."""
    decision: str
    reason: str = ""
    at: str = ""
    pipeline: str | None = None
    history: list[dict] = field(default_factory=list)


@dataclass
class EnvOrigin:
    """What an environment is and where it comes from: its name, the theme and tags it was made
    from, and what made it (`origin`: "envforge generate", "hand-written reference"). The first
    fields of its manifest (pipeline.manifest.packaged and reference write them)."""
    name: str = ""
    theme: str | None = None
    tags: dict = field(default_factory=dict)
    origin: str | None = None


@dataclass
class Generated:
    """How envforge generate made an environment, as its package stage records it in the manifest
    after the EnvOrigin fields (a hand-written environment has none): the model and seed, when, each
    stage's latest attempt (RunDB.stage_record) and what the stages cost together."""
    model: str | None = None
    seed: int | None = None
    generated_at: str | None = None
    stages: dict | None = None
    cost_usd: float | None = None

    @staticmethod
    def of(model: str | None, seed: int | None, stages: dict) -> "Generated":
        """The one builder, at packaging: the time (local) and the stages' total cost."""
        return Generated(model, seed, time.strftime("%Y-%m-%d %H:%M:%S"), stages,
                         round(sum(float(s.get("usd") or 0.0) for s in stages.values()), 6))


@dataclass
class Manifest(KeepsUnknown, Generated, EnvOrigin, Record):
    """ENV/manifest.json: what an environment is and what was done to it: its origin (EnvOrigin),
    how generate made it (Generated), verify's verdict, its skins, the hash of each file and a
    person's decision. Written only through pipeline.manifest's operations."""
    KIND = "manifest"
    OMIT_DEFAULTS = True
    verification: VerificationSummary | None = None
    confinement: str | None = None
    runs_as: str | None = None  # the uid verify's environment code ran as (capabilities.runs_as)
    difficulty_baseline: DifficultyBaseline | None = None
    skins: dict[str, Skin] = field(default_factory=dict)
    files: dict[str, str] | None = None
    human_review: HumanReview | None = None


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
    OMIT_NONE = True
    name: str
    stage: str
    reason: str
    details: dict = field(default_factory=dict)  # the Rejected's details: problems, traceback, verification
    stages: dict = field(default_factory=dict)  # the latest attempt of each stage (RunDB.stage_record)
    log_excerpt: list[str] = field(default_factory=list)
    rejected_at: str = ""
    cause: RejectionCause | None = None  # why, for code (pipeline.errors.Rejected.cause); None: none named


@dataclass
class ModelCall(Record):
    """A line of OUT/_work/NAME/calls.jsonl, generate's call journal: the n-th model call of a
    stage and its response (pipeline.llm.messages.Response.to_dict), written before it is used."""
    KIND = "model_call"
    stage: str
    index: int
    response: dict


@dataclass
class CodingStep(Record):
    """A line of OUT/_work/NAME/trajectory.jsonl, the coding agent's log of a stage (code, repair):
    a model reply (CodingReply) or the result of one of the tool calls it asked for
    (CodingToolResult), both of the stage's `step`-th model call. A line written before the lines
    named their shape (no `type`) is the shape its fields make it: a tool result names its `tool`."""
    KIND = "coding_step"
    TAG = "type"
    stage: str
    step: int

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if isinstance(value, dict) and cls.TAG not in value:
            return {cls.TAG: CodingToolResult.TAG_VALUE if "tool" in value else CodingReply.TAG_VALUE, **value}
        return value


@dataclass
class CodingReply(KeepsUnknown, CodingStep):
    """The model's reply: its text (None: it wrote none) and the tool calls run of it ({"name",
    "arguments"}); `dropped_tool_calls` more it asked for past the per-reply limit were not run."""
    TAG_VALUE = "reply"
    OMIT_NONE = True
    tool_calls: list[dict]
    text: str | None = None
    dropped_tool_calls: int | None = None


@dataclass
class CodingToolResult(KeepsUnknown, CodingStep):
    """What one tool call of the reply returned to the model (cut at 4,000 characters), and whether
    it failed; a run_check's also what the check found, counted (None in a line written before)."""
    TAG_VALUE = "tool_result"
    OMIT_NONE = True
    tool: str
    error: bool
    result: str
    check: CheckFound | None = None


@dataclass
class CheckFound(KeepsUnknown, Shape):
    """What one `envforge check` the coding agent ran found (pipeline/check's report): review says
    it from these counts, not from the words the model read."""
    errors: int
    warnings: int
    first_error: str = ""  # the first error, located (cut at 500 characters)

    @property
    def verdict(self) -> str:
        """"passed", or "failed: N error(s), M warning(s); first: ..."."""
        if not self.errors:
            return "passed"
        return (f"failed: {self.errors} error(s), {self.warnings} warning(s)"
                + (f"; first: {self.first_error}" if self.first_error else ""))


# -- level_max_rewards.json -------------------------------------------------------------------

@dataclass
class DifficultyFigure(KeepsUnknown, Shape):
    """One figure of a level's difficulty profile (pipeline/difficulty.py): its value and how it
    stands: `exact` (proved, or measured whole on a deterministic level), else a bound
    (`at_least` / `at_most`, the value being the one the score uses) or a sample estimate
    (`basis` says which: "exact", "upper_bound", "lower_bound", "range", "sample")."""
    OMIT_NONE = True
    value: float | None
    exact: bool
    basis: str
    at_least: float | None = None
    at_most: float | None = None


# A difficulty profile's bands: ranges of its score, both ends in (pipeline/difficulty.py documents them).
BANDS = {"easy": (0, 39), "medium": (40, 59), "hard": (60, 100)}


def band_of(score: int) -> str:
    return next(name for name, (lo, hi) in BANDS.items() if lo <= score <= hi)


def band_range(text: str) -> tuple[int, int]:
    """A band's score range: a name of BANDS or "LO..HI" (whole numbers 0..100); ValueError otherwise."""
    if text in BANDS:
        return BANDS[text]
    lo, sep, hi = str(text).partition("..")
    try:
        low, high = int(lo), int(hi)
    except ValueError:
        low = high = -1
    if not sep or not 0 <= low <= high <= 100:
        raise ValueError(f"expected a band ({', '.join(BANDS)}) or a score range LO..HI with 0 <= LO <= HI <= 100, "
                         f"found {str(text)[:40]!r}")
    return low, high


@dataclass
class DifficultyProfile(KeepsUnknown, Shape):
    """How hard a level is, from the evidence of verify's search and episodes (pipeline/difficulty.py):
    the figures, the ordinal `score` built from them (0 easiest .. 100 hardest; `score_version`
    names the formula) and its `band` ("easy", "medium", "hard"). `trivial`: why the level is
    trivial (doing nothing or one action repeated scores its max, or one step solves it), else None."""
    OMIT_NONE = True
    score: int
    band: str
    score_version: int
    shortest_witness: DifficultyFigure
    nodes_to_max: DifficultyFigure
    branching: DifficultyFigure
    random_success_rate: DifficultyFigure
    random_normalized: DifficultyFigure
    best_constant_normalized: DifficultyFigure
    profile_nodes: int
    trivial: str | None = None


@dataclass
class LevelMaxEntry(KeepsUnknown, Shape):
    """One level's max reward and how it was found (AutoEnv C.1: {"max_reward": x, ...}, or x), and,
    in an entry envforge's verify wrote, its certification (pipeline/levelmax.py's LevelMax.entry):
    the fields after `notes`, all None in a foreign entry. An entry is verify's when it carries
    `certainty` ("certified", "lower_bound", "unconfirmed_bound", "unknown", "estimate"); verify
    writes every certification field, a null bound included (`to_dict`)."""
    OMIT_DEFAULTS = True
    max_reward: float
    calculation_method: str | None = None
    notes: str | None = None
    validator_bound: float | None = None  # the validator's analytic bound (a hypothesis)
    search_reward: float | None = None  # what the search's replayed witness scores
    search_exhaustive: bool | None = None
    search_nodes: int | None = None
    witness: list[dict] | None = None  # the actions that score search_reward (or the corrected max)
    corrected: bool | None = None  # the max differs from the validator's bound or an earlier max
    nothing_reward: float | None = None  # what doing nothing scores
    certainty: str | None = None
    best_seen: float | None = None  # the best total of any rollout seen on the level
    proof: str | None = None  # why the max is exact: "exhausted", "upper_bound"; "" when it is not proved
    upper_bound: float | None = None  # the best proved or declared upper bound
    cut_by_clock: bool | None = None  # the --search-seconds safety stop cut a search
    bound_refuted: str | None = None  # how a step broke the DSL's reward bound ("" when none did)
    evidence_bound: float | None = None  # what the search's steps suggest (a hypothesis, never a proof)
    exact: bool | None = None  # the max is proved (`proof`)
    split: str | None = None  # "levels" or "val_levels"
    seed: int | None = None  # a generated level's seed
    expectation: dict | None = None  # a stochastic level: the best policy's mean over chance seeds (verify/chance.py)
    difficulty: DifficultyProfile | None = None  # how hard the level is (pipeline/difficulty.py)

    NULLS_WRITTEN: ClassVar[tuple[str, ...]] = ("validator_bound", "upper_bound", "evidence_bound")
    CERTAINTIES: ClassVar[tuple[str, ...]] = ("certified", "lower_bound", "unconfirmed_bound", "unknown", "estimate")

    @classmethod
    def coerce(cls, value: Any) -> Any:
        return {"max_reward": value} if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @property
    def verified(self) -> bool:
        """Whether envforge's verify certified this max (else it is a claim of whoever wrote the file)."""
        return self.certainty in self.CERTAINTIES

    def to_dict(self) -> dict:
        out = super().to_dict()
        if not self.verified:
            return out
        # verify's entry names a bound it does not have (null), in the order of the fields
        ordered = {f.name: out[f.name] if f.name in out else None for f in fields(self)
                   if f.name in out or f.name in self.NULLS_WRITTEN}
        return ordered | {k: v for k, v in out.items() if k not in ordered}


# -- verify's verdict and figures (pipeline/verify/stages.py) ------------------------------------
# Each stage's figures: what it counted, also when it rejected. Open: a folder verified by another
# envforge may carry figures this one does not know (kept as they were). A figure a stage sets only
# in some runs is None when it did not, and left out of the file.

@dataclass
class StageFigures(KeepsUnknown, Shape):
    """What every model-free stage records (and `total`, for all of them): its wall and CPU seconds
    (pipeline.verify.context.Clock) and its warnings."""
    OMIT_NONE = True
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    warnings: list[str] | None = None

    def summary(self) -> str:
        """The figures in a line, as `envforge verify` prints them under the stage's name."""
        return self.times()

    def times(self) -> str:
        return f"{self.wall_seconds:g}s wall, {self.cpu_seconds:g}s CPU"


@dataclass
class ExecutionFigures(StageFigures):
    """Random and planner rollouts on every level (pipeline/verify/execution.py)."""
    levels: int = 0
    episodes: int = 0
    steps: int = 0
    planner_nodes: int = 0
    truncated_episodes: int = 0
    failures_by_kind: dict[str, int] = field(default_factory=dict)
    end_conditions: dict | None = None  # {"checked": [...], "unchecked": {condition: why}}
    dynamics: str | None = None  # the dynamics' fingerprint (pipeline/verify/dynamics.py): equal, the same game

    def summary(self) -> str:
        return (f"{self.episodes} episodes ({self.steps} steps) on {self.levels} levels, planner search "
                f"{self.planner_nodes} nodes, failures {self.failures_by_kind or 'none'}; {self.times()}")


@dataclass
class ClaimCheck(KeepsUnknown, Shape):
    """A level's shipped max reward (level_max_rewards.json) set beside what verification found
    (pipeline/verify/claims.py, whose docstring says what each `status` means). `exact` and `why` are
    None in a verification.json written before verify proved maxima; `exhaustive` in one another
    tool wrote."""
    OMIT_NONE = True
    claimed: float
    found: float  # the best score verification saw on the level
    exhaustive: bool | None = field(default=None, kw_only=True)  # the search visited every state
    exact: bool | None = field(default=None, kw_only=True)  # the found max is proved
    status: str  # confirmed | reached | beaten | unreachable | unconfirmed
    why: str | None = None  # what makes an unreachable claim unreachable

    STATUSES: ClassVar[tuple[str, ...]] = ("confirmed", "reached", "beaten", "unreachable", "unconfirmed")

    @property
    def standing(self) -> str:
        """`status` as this envforge means it. Before "reached" existed, verify called a claim its
        witness scored "confirmed" whether or not a proof backed it: a "confirmed" that is not
        `exact` (False, or None in a file written before proofs) is "reached"."""
        return "reached" if self.status == "confirmed" and self.exact is not True else self.status


@dataclass
class LevelsFigures(StageFigures):
    """The levels made and certified (pipeline/verify/levels.py, certify.py); level keys as in
    level_max_rewards.json."""
    seeds_tried: int = 0
    generated_kept: int = 0
    duplicates: int = 0
    rejected_by_validator: int = 0
    unfit: int = 0
    shipped_levels: int = 0
    search_nodes: int = 0
    search_seconds: float = 0.0
    search_workers: int = 0
    corrected: int = 0  # max rewards corrected against the validator's bound
    examples: list[str] = field(default_factory=list)  # why-not examples (a rejected or unfit level)
    search_budget: dict = field(default_factory=dict)
    stochastic: dict | bool | None = None  # where a step first drew random numbers (verify/chance.py), or False
    stochastic_note: str | None = None
    exact: int | None = None  # levels whose max reward is proved
    safety_stops: int | None = None  # searches the --search-seconds safety stop cut
    nodes_per_second: int | None = None
    distinct_levels: int | None = None
    validator_warnings: dict[str, list[str]] | None = None
    validator_refuted: dict | None = None  # level -> the witness scoring above the validator's bound
    shipped_duplicates: dict[str, str] | None = None
    expectation_estimates: dict | None = None
    levels_scored: list[str] | None = None
    max_rewards: dict[str, float] | None = None
    lower_bounds: list[str] | None = None
    stopped_at_claim: list[str] | None = None  # lower bounds whose search stopped on reaching a claim (no proof)
    exact_levels: list[str] | None = None
    unknown_maxima: dict[str, str] | None = None  # level -> why it has no max to divide by
    gaps: dict[str, float] | None = None  # level -> upper bound - max reward
    no_upper_bound: dict[str, str] | None = None  # level -> why its lower bound has no upper bound
    generator_safety_stop: str | None = None  # a generator or validator call the --generator-seconds stop cut
    generated_searched_until_fit: bool | None = None  # generated levels only judge the generator (searched until fit)
    cut_by_safety_stop: list[str] | None = None
    claims: dict[str, ClaimCheck] | None = None  # the shipped level_max_rewards.json compared (verify/claims.py)
    written: list[str] | None = None
    # level -> {"action.parameter": {"values": [...] the search tried, "refined": [...] added by refinement}}
    parameter_values: dict[str, dict] | None = None

    def summary(self) -> str:
        return (
            f"{self.seeds_tried} seeds tried, {self.generated_kept} kept, {self.duplicates} duplicates, "
            f"{self.rejected_by_validator} rejected by the validator, {self.unfit} unfit; "
            f"{len(self.levels_scored or [])} levels scored, {self.corrected} max reward(s) corrected; "
            f"search {self.search_nodes} nodes in {self.search_seconds:g}s"
            + (f" ({self.nodes_per_second:,} nodes/s)" if self.nodes_per_second else "")
            + f"; {len(self.exact_levels or [])} max reward(s) exact"
            + (f"; {len(self.lower_bounds)} only a lower bound ({self.why_lower()}{self.bounds()})"
               if self.lower_bounds else "")
            + (f"; {len(self.unknown_maxima)} unknown" if self.unknown_maxima else "")
            + (f"; {len(self.cut_by_safety_stop)} cut by the --search-seconds safety stop (load-dependent)"
               if self.cut_by_safety_stop else "")
            + ("; a generator or validator call cut by the --generator-seconds safety stop (load-dependent)"
               if self.generator_safety_stop else "")
            + (f"; validator refuted on {len(self.validator_refuted)} level(s) (a replayed witness scores where "
               f"it rejects)" if self.validator_refuted else "")
            + f"; {self.times()}"
        )

    def why_lower(self) -> str:
        """Why the searches of the lower bounds ended short of a proof: their budget ran out, or they
        stopped on reaching a claim."""
        at_claim = len(self.stopped_at_claim or [])
        spent = len(self.lower_bounds or []) - at_claim
        claim = "the search stopped on reaching the validator's or shipped claim, which proves nothing"
        if not at_claim:
            return "search budget spent"
        return claim if not spent else f"search budget spent on {spent}; {claim} on {at_claim}"

    def bounds(self) -> str:
        """How far the lower bounds may be from the max: their gaps to the DSL's reward bound, and the
        levels with no upper bound and why ("" when neither)."""
        parts = []
        if self.gaps:
            parts.append(f"gap to the DSL's reward bound at most {max(self.gaps.values()):g} on {len(self.gaps)}")
        if self.no_upper_bound:
            reasons = sorted(set(self.no_upper_bound.values()))
            parts.append(f"no upper bound on {len(self.no_upper_bound)}: {reasons[0]}" + (
                f" (and {len(reasons) - 1} other reason(s))" if len(reasons) > 1 else ""))
        return f": {'; '.join(parts)}" if parts else ""


@dataclass
class LevelScores(KeepsUnknown, Shape):
    """The reliability stage's figures of one level."""
    OMIT_NONE = True
    max_reward: float
    max_certainty: str
    random_mean_total: float
    planner_total: float
    random_normalized: float | None = None  # None: the level has no max to divide by (unscored says why)
    planner_normalized: float | None = None
    unscored: str | None = None


@dataclass
class ConstantPolicyScore(KeepsUnknown, Shape):
    """The constant policy scoring best (pipeline/verify/reliability.py): its name and its mean
    normalized reward over the scored levels."""
    policy: str
    normalized: float


@dataclass
class ReliabilityFigures(StageFigures):
    """The search planner against the random agent and constant policies (pipeline/verify/reliability.py)."""
    levels: int = 0
    episodes: int = 0
    margin: float = 0.0
    random_agent: str = ""
    random_episodes_per_level: int = 0
    workers: int | None = None  # levels scored at once
    per_level: dict[str, LevelScores] = field(default_factory=dict)
    constant_policies: list[str] = field(default_factory=list)
    claims: dict[str, ClaimCheck] | None = None
    corrected: int | None = None
    unscored_levels: dict[str, str] | None = None
    random_normalized: float | None = None
    planner_normalized: float | None = None
    constant_normalized: dict[str, float] | None = None
    best_constant_policy: ConstantPolicyScore | None = None
    inconclusive: str | None = None  # why the figures decide nothing
    # invalid play (each undeclared or malformed action repeated): its best total on any level, by policy
    invalid_play: dict[str, float] | None = None
    trivial_levels: dict[str, str] | None = None  # level -> why it is trivial (reliability.trivial_levels)
    difficulty: dict[str, int] | None = None  # level -> its difficulty score (pipeline/difficulty.py)
    difficulty_bands: dict[str, int] | None = None  # band -> how many levels fall in it

    def summary(self) -> str:
        shown = ["?" if x is None else x for x in (self.random_normalized, self.planner_normalized)]
        bands = ("; difficulty " + ", ".join(f"{n} {band}" for band, n in self.difficulty_bands.items()) +
                 f" (scores {min(self.difficulty.values())}..{max(self.difficulty.values())})"
                 if self.difficulty_bands and self.difficulty else "")
        return (f"random agent {shown[0]} vs planner {shown[1]} normalized (margin {self.margin:g}), "
                f"{self.episodes} episodes{bands}; {self.times()}")


@dataclass
class ReactFigures(KeepsUnknown, Shape):
    """verify --model: a short ReAct rollout (pipeline/verify/models.py)."""
    OMIT_NONE = True
    model: str
    ran: bool
    level: str | None = None
    steps: int | None = None
    stop_reason: str | None = None
    total_reward: float | None = None
    format_errors: int | None = None
    note: str | None = None

    def summary(self) -> str:
        if self.level is None:  # no episode was played
            return f"ReAct rollout with {self.model}: not played ({self.note})"
        return (f"ReAct rollout with {self.model}: {self.steps or 0} step(s) on {self.level}, stopped: "
                f"{self.stop_reason}, reward {self.total_reward}")


@dataclass
class DifferentialFigures(KeepsUnknown, Shape):
    """verify --agent-models WEAK,STRONG: the differential test (pipeline/verify/models.py)."""
    weak: str
    strong: str
    runs: int
    levels: int
    weak_normalized: float
    strong_normalized: float
    per_run: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> str:
        return (f"{self.weak} {self.weak_normalized} vs {self.strong} {self.strong_normalized} normalized over "
                f"{self.runs} run(s) of {self.levels} level(s)")


@dataclass
class ModelFreeFigures:
    """The model-free stages' figures: a field per stage of pipeline/verify/stages.py, named after it,
    which verify sets to what the stage returned; `total`: their wall and CPU seconds together."""
    execution: ExecutionFigures | None = None
    levels: LevelsFigures | None = None
    reliability: ReliabilityFigures | None = None
    total: StageFigures | None = None


@dataclass
class ModelFormsFigures:
    """The model-driven forms' figures (pipeline/verify/models.py), after the model-free stages
    accepted: `verify --model`'s ReAct rollout and `--agent-models`' differential test."""
    execution_react: ReactFigures | None = None
    reliability_models: DifferentialFigures | None = None


@dataclass
class VerifyFigures(KeepsUnknown, ModelFormsFigures, ModelFreeFigures, Shape):
    """Each stage's figures, for the stages that ran (a stage that did not: None, left out)."""
    OMIT_NONE = True


# -- why verify rejected (pipeline/verify/causes.py) ---------------------------------------------
# A rejection's `reason` is for a person; its cause is for code: a typed value naming the failure
# mode and the figures a program decides on. verification.json records it as {"kind": ..., fields}.
# A new failure mode is a new shape here (`_cause(its kind)`); a field an old reader must not
# misread is a new MAJOR of Verification.

@dataclass(frozen=True)
class RejectionCause(Shape):
    """Why a verification stage rejected, by kind (`TAG`): the shapes below. A cause that reads as
    none of them (a kind a newer envforge wrote, or fields that do not fit) reads as an UnknownCause,
    kept as written: the verdict and figures beside it still read."""
    TAG = "kind"

    @classmethod
    def from_dict(cls, data: Any, where: str = "record") -> Any:
        try:
            return super().from_dict(data, where)
        except RecordError:
            if cls is not RejectionCause or not isinstance(data, dict) or not isinstance(data.get(cls.TAG), str):
                raise
            return UnknownCause(data[cls.TAG], {k: v for k, v in data.items() if k != cls.TAG})


@dataclass(frozen=True)
class UnknownCause(RejectionCause):
    """A cause this envforge cannot read as one of its kinds: `kind` as written, and its other fields
    (`written`), written back as they were. Code deciding on a cause treats it as no known cause."""
    kind: str
    written: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {self.TAG: self.kind, **self.written}


def _cause(kind: str):
    """Declares a RejectionCause shape recorded as {"kind": kind, its fields}."""
    def declare(cls: type) -> type:
        cls.TAG_VALUE = kind  # type: ignore[attr-defined]
        return dataclass(frozen=True)(cls)
    return declare


@_cause("worker_failed")
class WorkerFailed(RejectionCause):
    """A sandbox failure the stage did not expect (an environment's fault all the same)."""
    failure: str  # pipeline.sandbox.SandboxFailure.kind
    where: str


@_cause("unreadable_folder")
class UnreadableFolder(RejectionCause):
    """The folder does not read as a playable environment (a file missing or malformed): nothing ran.
    The fields are the located problem's (pipeline.located.Problem)."""
    file: str
    expected: str
    found: str
    path: str = ""  # the field of a structured file, when it is one
    line: int | None = None


@_cause("env_does_not_load")
class EnvDoesNotLoad(RejectionCause):
    """env_main.py does not import, or its SkinEnv subclass does not instantiate, in a worker."""
    failure: str  # SandboxFailure.kind
    where: str
    detail: str = ""  # its first 500 characters


@_cause("env_crashed")
class EnvCrashed(RejectionCause):
    """The environment failed (raised, hung, overran its CPU, replied out of shape) while envforge
    played a level: `activity` says what envforge was doing (a random episode, the planner's
    search, the search for a level's max reward, the reliability episodes, ...)."""
    failure: str  # SandboxFailure.kind: exception, timeout, cpu, crash, bad_reply, ...
    where: str  # the env's file:line when known, else the file at fault
    activity: str
    level: str = ""  # "" when the failing level is not known
    step: int | None = None  # the step that failed (1-based); None: during reset or a search call
    action: str | None = None  # that step's action, as the reason shows it
    op: str | None = None  # the worker call that failed, when no step is known


@_cause("empty_observation")
class EmptyObservation(RejectionCause):
    """An observation that is None or blank, after reset (`step` 0) or after a step."""
    level: str
    step: int
    activity: str
    action: str | None = None


@_cause("end_condition_ignored")
class EndConditionIgnored(RejectionCause):
    """A DSL termination condition became true before the step cap while done() stayed false."""
    condition: str  # where config.yaml declares it: "termination.conditions[0]"
    text: str  # the condition as written
    step: int  # the step after which it holds
    action: str  # that step's action
    level: str
    activity: str  # the episode: "random episode 1", "planner episode"


@_cause("generator_crashed")
class GeneratorCrashed(RejectionCause):
    """generate_level failed for a seed (not by its wall-clock safety stop: SafetyStop)."""
    seed: int
    failure: str
    where: str


@_cause("validator_crashed")
class ValidatorCrashed(RejectionCause):
    """validate_level failed on a level (not by its wall-clock safety stop: SafetyStop); `level`
    is a level file or "the level of seed N"."""
    level: str
    failure: str
    where: str


@_cause("safety_stop")
class SafetyStop(RejectionCause):
    """A call of the generator or validator ran past its wall-clock safety stop (generator_seconds):
    what decided is machine load as much as the environment, and the verdict says so (`detail`)."""
    detail: str


@_cause("generator_and_shipped_levels_fail")
class GeneratorAndShippedLevelsFail(RejectionCause):
    """The generator failed (`generator`: why) and so did the shipped levels checked after it
    (`shipped`: why): both are named, neither hides the other."""
    generator: RejectionCause | None  # None: a failure that named no cause
    shipped: RejectionCause | None


@_cause("generator_ignores_seed")
class GeneratorIgnoresSeed(RejectionCause):
    """generate_level made the same level for all `seeds` seeds tried."""
    seeds: int


@_cause("validator_rejects_all")
class ValidatorRejectsAll(RejectionCause):
    """The validator refused every distinct level the generator made (`rejected` of them), and with
    `shipped_refused` the shipped levels too (then it, not the generator, is at fault)."""
    rejected: int
    shipped_refused: bool = False


@_cause("too_few_levels")
class TooFewLevels(RejectionCause):
    """The generator made fewer distinct, valid, fit levels than `wanted` within its seeds; the
    others were duplicates, refused by the validator, or unfit (counts)."""
    wanted: int
    kept: int
    duplicates: int
    rejected_by_validator: int
    unfit: int


@_cause("validator_accepts_unsolvable")
class ValidatorAcceptsUnsolvable(RejectionCause):
    """The validator accepted `levels` generated levels on which an exhaustive search scores nothing
    (the first: the level of `seed`, and why it is unfit)."""
    levels: int
    seed: int | None
    why: str


@_cause("bad_generated_level")
class BadGeneratedLevel(RejectionCause):
    """A generated level that cannot be written as a level file (not YAML, or not a mapping)."""
    seed: int | None
    expected: str
    found: str


@_cause("shipped_level_refused")
class ShippedLevelRefused(RejectionCause):
    """The validator refuses the shipped level `source`, and no replayed search witness scores on it
    (`refuted`: shipped levels it refuses on which a witness does score)."""
    source: str
    refuted: int = 0


@_cause("unfit_level")
class UnfitLevel(RejectionCause):
    """A shipped level on which search scores no more than doing nothing (proved when the search was
    exhaustive), or on which doing nothing already scores the max."""
    source: str
    search_reward: float  # what the search's replayed witness scores
    nothing_reward: float  # what doing nothing scores
    search_exhaustive: bool
    why: str


@_cause("val_test_overlap")
class ValTestOverlap(RejectionCause):
    """Shipped validation levels identical to test levels: the split would measure nothing."""
    overlapping: int  # validation levels equal to a test level
    distinct: int  # distinct levels shipped
    shipped: int  # levels shipped
    pairs: dict[str, str] = field(default_factory=dict)  # validation level -> the test level it equals


@_cause("witness_not_replayed")
class WitnessNotReplayed(RejectionCause):
    """A search witness of `actions` actions scores differently replayed from a fresh reset: the
    environment does not behave the same after a snapshot is restored."""
    source: str
    actions: int
    expected: float  # what the search found it scores
    found: float  # what the replay scored
    steps: int  # steps the replay took


@_cause("no_scorable_levels")
class NoScorableLevels(RejectionCause):
    """None of `levels` levels has a known, positive max reward to divide normalized scores by
    (`unscored`: why not, for up to three)."""
    levels: int
    unscored: dict[str, str] = field(default_factory=dict)


@_cause("doing_nothing_scores_max")
class DoingNothingScoresMax(RejectionCause):
    """Doing nothing (the no-op repeated, or taking no step) scores the max on `levels` of `of`
    levels (at least half): the reward pays for time passing."""
    levels: int
    of: int
    level: str  # an example level,
    nothing_reward: float  # ... what doing nothing scores there,
    max_reward: float  # ... and its max
    no_op: str | None = None  # the no-op action's name; None: taking no step


@_cause("degenerate_policy")
class DegeneratePolicy(RejectionCause):
    """A constant-action policy nearly maxes the reward: its mean normalized score is within
    `margin` of the search planner's, and one of them within `margin` of the max."""
    policy: str  # "repeating RESEARCH", "doing nothing (repeating wait)"
    action: dict  # the action it repeats
    normalized: float  # its mean share of the max over the scored levels ("scores 0.93 of the max")
    planner_normalized: float
    margin: float
    levels: int  # levels scored


@_cause("invalid_play_pays")
class InvalidPlayPays(RejectionCause):
    """Actions the environment does not declare (an unknown name, a parameter outside its declared
    domain or missing) earn reward: more than the max, or more than doing nothing and every
    constant policy there by `margin` of the max."""
    policy: str  # "repeating an undeclared action 'undeclared_action'"
    action: dict  # the invalid action it repeats
    level: str
    total: float  # what it scored there
    max_reward: float
    baseline: float  # the best of doing nothing and every constant policy of declared actions there
    margin: float


@_cause("planner_scores_nothing")
class PlannerScoresNothing(RejectionCause):
    """The search planner scores nothing on average although some level's search was exhaustive."""
    planner_normalized: float
    levels: int


@_cause("no_better_than_random")
class NoBetterThanRandom(RejectionCause):
    """The search planner's mean normalized reward exceeds the random agent's by no more than
    `margin` (the planner a skilled agent: it scores at least 1 - margin of the max)."""
    planner_normalized: float
    random_normalized: float
    margin: float
    levels: int  # levels scored


@_cause("react_rollout_failed")
class ReactRolloutFailed(RejectionCause):
    """verify --model: the environment failed on a ReAct agent's actions (`detail`: how)."""
    model: str
    level: str
    steps: int
    detail: str


@_cause("models_not_separated")
class ModelsNotSeparated(RejectionCause):
    """verify --agent-models: the weaker model scored at least as high as the stronger one in every
    one of `runs` runs (their mean normalized rewards)."""
    weak: str
    strong: str
    weak_normalized: float
    strong_normalized: float
    runs: int


# -- why generate rejected a theme without a finding (pipeline/generate/run.py) ---------------------

@_cause("budget_cap_reached")
class BudgetCapReached(RejectionCause):
    """A budget cap refused a stage's next model call (pipeline.llm.ledger's BudgetExceeded): nothing
    was found wrong with the theme. `scope`: "run" (--budget-usd; `--resume` goes on from the stage)
    or "theme" (--theme-budget-usd: what the theme may cost). The dollars are None in a cause read
    from a run database written before causes (its stage attempt's exit status said a cap stopped it)."""
    scope: str
    cap_usd: float | None = None
    spent_usd: float | None = None  # spent or committed when the call was refused
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"scope": ("run", "theme")}  # the values a field may take
    estimate_usd: float | None = None  # what the refused call could have cost

    @classmethod
    def coerce(cls, value: Any) -> Any:
        """A scope this envforge does not know makes the cause one it cannot read (an UnknownCause):
        advice must not take it for a theme's or the run's cap."""
        for name, allowed in cls.CHOICES.items():
            if isinstance(value, dict) and value.get(name) not in allowed:
                raise RecordError(f"{name}: expected one of {', '.join(allowed)}, found {str(value.get(name))[:40]!r}")
        return value


@dataclass
class VerificationResult(Record):
    """verify's verdict: what `envforge verify --out FILE` writes (its --json document) and the
    library's verify returns."""
    KIND = "verify_report"
    accepted: bool
    stage: str | None = None  # the stage that rejected it
    reason: str = ""
    stages: VerifyFigures = field(default_factory=VerifyFigures)
    env_dir: str = ""
    confinement: str = ""  # the sandbox rung its workers ran on (pipeline/sandbox/outside/capabilities.py)
    runs_as: str = ""  # the uid their environment code ran as (capabilities.runs_as)
    # the options it ran with (pipeline.verify.context.VerifyRunOptions.recorded)
    options: dict = field(default_factory=dict)
    cause: RejectionCause | None = None  # why the rejecting stage rejected, for code (None: accepted)


@dataclass
class Verification(KeepsUnknown, VerificationResult):
    """ENV/verification.json: verify's verdict, each stage's figures (pipeline/verify/stages.py) and
    the options it ran with (pipeline.verify.context.VerifyRunOptions, every setting but its progress line)."""
    KIND = "verification"
    # a folder verified by an older envforge may carry fields this one no longer writes
    verified_at: str = ""


@dataclass
class LevelMaxRewards(KeepsUnknown, Record):
    """ENV/level_max_rewards.json in the AutoEnv C.1 shape (a shipped file may carry more)."""
    KIND = "level_max_rewards"
    environment_id: str = ""
    calculation_timestamp: str = ""
    levels: dict[str, LevelMaxEntry] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

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


@dataclass(frozen=True)
class LearnSettings(Record):
    """The settings of a learning study as recorded (learning.settings.Settings, which holds their
    defaults, less `concurrency`, which is no part of what a study is): in its study.json, and in
    a recording's learn/settings.json (a replay runs with them)."""
    KIND = "learn_settings"
    iterations: int
    runs: int
    train_levels: int
    test_levels: int | None
    max_parents: int
    max_steps: int
    signal_episodes: int
    search_nodes: int
    search_seconds: float
    max_tokens: int
    temperature: float | None
    history: int


@dataclass
class Study(Record):
    """learn's OUT/study.json: what the study is (a --resume goes on with it as it was started)."""
    KIND = "study"
    envs: list[str]  # the environment folders, resolved
    methods: list[dict]  # learning.method_space.Method's fields
    settings: LearnSettings
    execution_model: str
    optimizer_model: str


@dataclass
class LearnResults(Record):
    """learn's report/results.json: every number of the study's report (learning/results.py)."""
    KIND = "learn_results"
    envs: list[str]  # environment names
    execution_model: str
    optimizer_model: str
    settings: dict  # learning.settings.Settings, concurrency included
    methods: list[dict]  # {name, label, and the Method's fields}
    baseline: dict  # env -> {score, dollars, tokens}
    runs: dict  # method -> env -> the run's figures (learning.results._run_figures)
    averages: dict  # method -> mean score over the environments
    upper_bounds: dict  # "best" | "pareto" | "all" -> {per_env, mean, methods}
    best_single: dict
    adaptive: dict
    figure3: dict  # top_k_gain, bound_by_m, incremental_top_k


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
class WhichEpisode:
    """Which episode a record is of: the first fields of an episode's record and of its trajectory's
    header. An episode's key is all but the split (KEY_FIELDS)."""
    env: str
    level: str
    run: int
    agent: str
    model: str
    split: str


@dataclass
class EpisodeRecord(WhichEpisode, Record):
    """A line of evaluate's episodes.jsonl: one episode, identified by (env, level, run, agent,
    model), with what determined it (its provenance)."""
    KIND = "episode"
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
    runs_as: str = ""  # the uid the environment code of the episode's worker ran as (capabilities.runs_as)
    difficulty: int | None = None  # the level's difficulty score when it was played (pipeline/difficulty.py)
    difficulty_band: str | None = None  # ... and its band

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


@dataclass
class TrajectoryLine(Record):
    """A line of an episode's trajectory (evaluate's trajectories/...jsonl), written as the episode
    goes: its header, a line per turn, what a user agent's run returned, and its end."""
    KIND = "trajectory"
    TAG = "type"


@dataclass
class EpisodeStart(WhichEpisode, TrajectoryLine):
    """The header: which episode, and what it was played with."""
    TAG_VALUE = "episode"
    max_reward: float | None
    env_dir: str
    limits: dict


@dataclass
class TurnLine(TrajectoryLine):
    """One turn: what the agent saw and did (long texts capped: pipeline.evaluate.episode.capped),
    and, when it sent an action, what the step returned."""
    TAG_VALUE = "turn"
    OMIT_NONE = True
    step: int
    observation: Any
    last_action_result: Any
    prompt: Any
    reply: Any
    thought: Any
    action: Any
    error: Any
    message: Any
    tokens_in: int
    tokens_out: int
    dollars: float
    total: float
    stop_reason: str | None
    reward: float | None = None
    done: bool | None = None
    terminated: bool | None = None
    truncated: bool | None = None
    events: list | None = None  # the events the step emitted
    result: Any = None
    invalid: Any = None
    t: int | None = None
    state_hash: str | None = None


@dataclass
class AgentReturned(TrajectoryLine):
    """What a user agent's run(env, env_info) returned (bounded)."""
    TAG_VALUE = "agent_returned"
    value: Any


@dataclass
class EpisodeEnd(TrajectoryLine):
    """The end: the episode's record."""
    TAG_VALUE = "end"
    record: EpisodeRecord


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


# -- evaluate's summary.json ------------------------------------------------------------------

NO_MODEL = "-"  # the model column of agents that call none
DIGITS = {"dollars": 6, "wall_seconds": 3, "mean_steps": 2}


def rounded(data, digits: int = 4):
    """`data` (summary dicts and lists) with each float rounded as it is written: DIGITS by key, else `digits`."""
    if isinstance(data, dict):
        return {k: rounded(v, DIGITS.get(k, digits)) for k, v in data.items()}
    if isinstance(data, list):
        return [rounded(v, digits) for v in data]
    return round(data, digits) if isinstance(data, float) else data


@dataclass
class EnvSummary(Shape):
    """One method's figures on one environment (pipeline/evaluate/report.py computes them)."""
    mean_normalized: float | None
    std: float | None
    episodes: int  # counted (infrastructure failures left out)
    scored: int  # ... with a normalized reward
    mean_steps: float | None
    runs: dict[int, float]  # run -> mean normalized over its levels
    clipped: int
    null_normalized: int
    null_reasons: list[str]
    excluded: dict[str, int]
    stop_reasons: dict[str, int]
    mean_total_reward: float | None
    action_validity_rate: float | None
    invalid_action_rate: float | None
    recovery_rate: float | None
    tokens_in: int
    tokens_out: int
    dollars: float
    wall_seconds: float
    tags: dict[str, str] = field(default_factory=dict)
    max_notes: list[str] = field(default_factory=list)  # scores that divide by a max that is not certified
    bands: dict[str, float | None] = field(default_factory=dict)  # difficulty band -> mean normalized reward

    def to_dict(self) -> dict:
        """As written and printed: floats rounded (see DIGITS); the object keeps them exact."""
        return rounded(super().to_dict())


@dataclass
class MethodSummary(Shape):
    """One agent and model on one split with one set of settings (episodes of different splits or
    settings are never averaged together)."""
    agent: str
    model: str
    envs: dict[str, EnvSummary]
    overall: dict
    split: str = "test"
    settings: dict = field(default_factory=dict)
    group: str = ""  # what tells it apart from the other summaries of the folder: "val", "settings 2"

    @property
    def label(self) -> str:
        base = self.agent if self.model == NO_MODEL else f"{self.agent} {self.model}"
        return f"{base} [{self.group}]" if self.group else base

    def to_dict(self) -> dict:
        """As written to summary.json: floats rounded (see DIGITS)."""
        return {"agent": self.agent, "model": self.model, "split": self.split, "settings": self.settings,
                "group": self.group, "envs": {name: s.to_dict() for name, s in self.envs.items()},
                "overall": rounded(self.overall)}


@dataclass
class EvaluateSummary(Record):
    """evaluate's summary.json: a summary per method (agent, model, split, settings)."""
    KIND = "evaluate_summary"
    methods: list[MethodSummary]


# -- probe --------------------------------------------------------------------------------------

@dataclass
class ProbeStart(Shape):
    """Where a probe item begins: reset `level` with `seed`, then play `prefix`."""
    level: str
    seed: int = 0
    prefix: list[dict] = field(default_factory=list)


@dataclass
class ProbeItem(Record):
    """A line of probe's items JSONL (pipeline/probe/items.py): one derived test, a shape per kind
    (predict, plan, change). Each holds what is needed to pose it and its answer key."""
    KIND = "probe_item"
    TAG = "kind"
    id: str
    env: str  # the env folder's name
    env_dir: str  # the folder the item was made from (plan items execute there)
    skin: str | None  # skins/<skin>.py rendered the observations; None: the env's own skin
    instruction: str  # agent_instruction.txt, as the agent reads it
    start: ProbeStart

    @property
    def kind(self) -> str:
        return self.TAG_VALUE


@dataclass
class PredictItem(ProbeItem):
    """Given `observation`, after `actions` (k of them), which candidate is the next observation?"""
    TAG_VALUE = "predict"
    observation: str = ""
    actions: list[dict] = field(default_factory=list)
    k: int = 1
    candidates: list[str] = field(default_factory=list)
    answer: int = 0  # index of the true observation in candidates
    # per candidate: truth | counterfactual_action | counterfactual_state
    sources: list[str] = field(default_factory=list)
    truth_samples: int = 1  # the truth was rendered this many times (different RNG states) and was always the same


@dataclass
class PlanItem(ProbeItem):
    """From `observation`, reach a state whose semantic observation has `target` (field -> value)."""
    TAG_VALUE = "plan"
    observation: str = ""
    target: dict[str, Any] = field(default_factory=dict)
    target_text: str = ""  # the target as the agent reads it
    target_observation: str = ""  # an observation (rendered) that meets the target
    max_length: int = 0  # steps left in the episode
    planner_length: int = 0
    planner_plan: list[dict] = field(default_factory=list)
    action_choices: list[dict] = field(default_factory=list)  # the planner's (and random agent's) actions
    random_success: float = 0.0  # share of random plans of planner_length that reach the target
    random_samples: int = 0


@dataclass
class ChangeItem(ProbeItem):
    """The agent watches `actions` played in a changed copy of the env (`observations`, T + 1 of them)
    and says at which step the first observation the original rules could not produce appeared."""
    TAG_VALUE = "change"
    # kind, description, parameters; "spec" is what pipeline.probe.variants selects (swap, state_delta),
    # a config_constant's path and "to" are written into a private copy's config.yaml
    mutation: dict[str, Any] = field(default_factory=dict)
    actions: list[dict] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # observations[t] after t actions, in the changed env
    t_star: int = 0  # first step whose observation differs from every one the original env produces
    original_at_t_star: str = ""  # what the original env showed at t*, for a reader


@dataclass
class ProbeScores(Record):
    """probe's probes-AGENT.json: an agent's score per environment, kind (and k), and per item."""
    KIND = "probe_report"
    agent: str
    groups: list[dict]  # {env, kind, k, items, score, random[, efficiency | reported]}
    items: list[dict]  # a row per item: {id, env, kind, skin, score, random, ...}


# -- export harbor ----------------------------------------------------------------------------

@dataclass
class HarborTask(Record):
    """A Harbor task's envforge/task.json, in its image (pipeline/api/harbor.py): the level it plays,
    and the max reward its normalized score divides by, with that max's note (EnvSpec.scoring_max)."""
    KIND = "harbor_task"
    environment: str  # the environment's name (its folder is envforge/env/ beside this file)
    level: str  # levels/level_01.yaml
    max_reward: float
    max_note: str = ""
    skin: str | None = None


@dataclass
class HarborTurn(Record):
    """A line of a Harbor task's episode log: what the agent sent to envforge-play on one turn (an
    action as `envforge play` reads one, or text that is none), replayed to show and to score it."""
    KIND = "harbor_turn"
    text: str


MODELS: tuple[type[Record], ...] = (
    Manifest, Verification, VerificationResult, LevelMaxRewards, EpisodeRecord, TrajectoryLine, EvaluateSummary,
    IterationLevels, LearnedAgent, PoolRecord, Study, LearnSettings, LearnResults, ThemeRecord, Rejection, ModelCall,
    CodingStep, ProbeItem, ProbeScores, HarborTask, HarborTurn,
)
