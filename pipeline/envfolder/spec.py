"""The one reader of an environment folder: `EnvSpec.open(path)` reads it once, through safe_io.

It reads config.yaml (the DSL), the episode's step limit, what the agent is told
(agent_instruction.txt, action_space.txt), the tags, the claimed max rewards
(level_max_rewards.json) and the level lists, and raises one `LocatedError` for the first thing
that is not what it should be. Every command that needs more than an env folder's path uses it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from envforge.dsl_schema.problems import typed
from envforge.pipeline import layout, records, safe_io
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.errors import LocatedError, UserError, not_a_folder
from envforge.pipeline.kinds import (
    ClaimCheck,
    DifficultyProfile,
    LevelMaxEntry,
    LevelMaxRewards,
    RecordError,
    Verification,
    band_range,
)
from envforge.pipeline.located import Problem

DEFAULT_MAX_STEPS = 100
SMALLEST_MAX_REWARD = 1e-6  # a positive claimed maximum below this makes normalised scores explode
UNCERTAIN = ("unknown", "lower_bound", "unconfirmed_bound")  # verify's certainties of a max it did not certify


def max_steps(config: Any, file: str = layout.CONFIG) -> int:
    """The episode's step limit: `termination.max_steps`, default 100 when absent. Anything but
    an integer of at least 1 (a boolean, a string, a float, -5) is a located error."""
    termination = config.get("termination") if isinstance(config, dict) else None
    if termination is None:
        return DEFAULT_MAX_STEPS
    if not isinstance(termination, dict):
        raise LocatedError(Problem(file, "termination", "a mapping with max_steps", typed(termination)))
    value = termination.get("max_steps")
    if value is None:
        return DEFAULT_MAX_STEPS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LocatedError(Problem(file, "termination.max_steps", "an integer of at least 1", typed(value)))
    return value


@dataclass(frozen=True)
class EnvSpec:
    """An environment folder as data, read once on the host (its code is never imported here): the
    one host-side handle of an environment. What agents read (instruction, action space, tools),
    its step cap, its levels per split and the max reward a normalized score on each divides by."""

    dir: layout.EnvDir
    config: dict
    max_steps: int
    instruction: str  # agent_instruction.txt, else the DSL's meta.description
    action_text: str  # action_space.txt as written; "" when the folder has none
    tags: dict[str, str]
    max_rewards: dict[str, float]  # level key (level_01.yaml) -> claimed max reward
    level_files: dict[str, list[str]] = field(default_factory=dict)  # split -> level ids (levels/level_01.yaml)
    manifest: dict = field(default_factory=dict)
    config_text: str = ""  # config.yaml as read, for the DSL checker's line numbers
    # level key -> (whether its max reward may divide a score, the note every normalized score on it carries)
    max_reward_notes: dict[str, tuple[bool, str]] = field(default_factory=dict)
    # level key -> its difficulty profile, as verify wrote it beside the max (pipeline/difficulty.py)
    difficulties: dict[str, DifficultyProfile] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def path(self) -> Path:
        return self.dir.path

    def levels(self, split: str = "test", limit: int | None = None) -> list[Level]:
        """The levels of `split` ("test": levels/, "val": val_levels/, or a split given by
        `with_levels`), the first `limit` of them when given."""
        ids = self.level_files.get(split, [])
        return [Level.parse(i) for i in (ids[:limit] if limit else ids)]

    def all_levels(self) -> list[Level]:
        return self.levels("test") + self.levels("val")

    def level(self, name: str | None = None) -> Level:
        """The level named "level_01", "levels/level_01.yaml" or "val_levels/level_11"; with no name,
        the first of all_levels. A UserError names the levels there are."""
        levels = self.all_levels()
        if name is None:
            if not levels:
                raise UserError(f"{self.path}: expected level files under {layout.LEVELS}/, found none; use --seed N")
            return levels[0]
        wanted = name if name.endswith(".yaml") else f"{name}.yaml"
        for candidate in levels:
            if str(candidate) == wanted or Path(str(candidate)).name == Path(wanted).name:
                return candidate
        raise UserError(f"--level {name}: expected one of {', '.join(Path(str(l)).stem for l in levels) or '(none)'}, "
                        f"found no such level")

    def difficulty(self, level: Level | str) -> DifficultyProfile | None:
        """The level's difficulty profile (level_max_rewards.json); None when verify wrote none."""
        return self.difficulties.get(layout.level_key(str(level)))

    def in_band(self, band: str, split: str = "test") -> list[Level]:
        """The levels of `split` whose difficulty score lies in `band` (a name of kinds.BANDS or "LO..HI");
        a UserError says why when there are none."""
        try:
            lo, hi = band_range(band)
        except ValueError as e:
            raise UserError(f"difficulty: {e}") from None
        levels = self.levels(split)
        kept = [lv for lv in levels if (p := self.difficulty(lv)) is not None and lo <= p.score <= hi]
        if not kept:
            scores = sorted(p.score for lv in levels if (p := self.difficulty(lv)) is not None)
            raise UserError(f"difficulty {band}: expected levels of the {split} split scoring {lo}..{hi}, found "
                            + (f"scores {scores[0]}..{scores[-1]}" if scores else "no difficulty profiles (envforge "
                               "verify --write writes them)") + f" in {self.path}")
        return kept

    def with_levels(self, split: str, levels: list[Level], max_rewards: dict[Level, float | None]) -> "EnvSpec":
        """This environment with `levels` as its split `split`, each scored against the max reward
        given for it (learn's training levels, certified when they were made)."""
        return replace(
            self,
            level_files={**self.level_files, split: [str(level) for level in levels]},
            max_rewards={**self.max_rewards, **{layout.level_key(str(k)): v for k, v in max_rewards.items()}},
        )

    def max_reward(self, level: Level | str) -> float | None:
        """The max reward a normalized score on `level` divides by: None when there is none or when it
        must not divide (unknown, or a claim found wrong): see scoring_max."""
        return self.scoring_max(level)[0]

    def max_note(self, level: Level | str) -> str:
        """What a normalized score on `level` must say about its max reward ("" when certified)."""
        return self.scoring_max(level)[1]

    def scoring_max(self, level: Level | str) -> tuple[float | None, str]:
        """(the max reward a normalized score on `level` divides by, or None; the note that goes with
        it): max_reward_standing's rule, the one every normalized score follows. A level the folder
        does not list (a training level given by with_levels) has no note: its given max divides."""
        key = layout.level_key(str(level))
        divides, note = self.max_reward_notes.get(key, (True, ""))
        return (self.max_rewards.get(key) if divides else None), note

    @cached_property
    def actions(self):
        """The one action space (ActionSpace), domains of untyped parameters read from evidence."""
        from envforge.pipeline.envfolder.actions import ActionSpace

        return ActionSpace.of(self)

    def playable(self) -> "EnvSpec":
        """This spec, when its DSL declares an action to play; else a LocatedError naming config.yaml."""
        if not self.actions:
            raise LocatedError.at(layout.CONFIG, "at least one action under transition.actions", "none")
        return self

    @cached_property
    def action_space(self) -> str:
        """What agents are told the actions are: action_space.txt, else derived from the DSL."""
        from envforge.pipeline.envfolder.action_text import ActionText

        return ActionText(self.actions, self.action_text).for_agent()

    @cached_property
    def tools(self) -> list[dict]:
        """One native tool schema per action."""
        from envforge.pipeline.envfolder.action_text import ActionText

        return ActionText(self.actions).tools()

    @classmethod
    def open(cls, path: str | Path, full_paths: bool = True) -> "EnvSpec":
        """Read the folder at `path`. Files are named in errors by their full path, or with
        `full_paths=False` relative to the folder (as `envforge check` reports them)."""
        env = layout.EnvDir.at(path)
        reader = Reader(env.path, full_paths)
        if not env.path.is_dir():
            raise LocatedError.at(str(env.path), "an environment folder", not_a_folder(env.path))
        missing = env.missing_required()
        if missing:
            raise LocatedError.at(", ".join(map(reader.name, missing)), "the file to exist", "it is missing")
        config_text = reader.text(layout.CONFIG)
        config = parse_config(config_text, reader.name(layout.CONFIG))
        steps = max_steps(config, reader.name(layout.CONFIG))
        meta = config.get("meta") if isinstance(config.get("meta"), dict) else {}
        instruction = reader.text(layout.AGENT_INSTRUCTION) or str(meta.get("description") or "")
        manifest = reader.json(layout.MANIFEST)
        if manifest is not None and not isinstance(manifest, dict):
            raise LocatedError(Problem(reader.name(layout.MANIFEST), "(document)", "a JSON object", typed(manifest)))
        tags = (manifest or {}).get("tags")
        max_rewards_data = reader.json(layout.LEVEL_MAX_REWARDS)
        claimed = claimed_max_rewards(max_rewards_data, reader.name(layout.LEVEL_MAX_REWARDS))
        checks = claim_checks(reader, layout.VERIFICATION)
        return cls(env, config, steps, instruction.strip(), reader.text(layout.ACTION_SPACE).strip(),
                   _strings(tags) if isinstance(tags, dict) else config_tags(config), claimed,
                   {split: env.levels(split) for split in layout.LEVEL_SPLITS}, manifest or {}, config_text,
                   max_reward_standing(max_rewards_data, claimed, checks,
                                       bool(isinstance(manifest, dict) and manifest.get("origin"))),
                   difficulties(max_rewards_data))


def read_config(path: str | Path, full_paths: bool = True) -> dict:
    """The folder's config.yaml (the DSL document) as EnvSpec.open reads it, without the rest of the
    folder: for a caller that has only the DSL (a theme's work folder, a copy it edits)."""
    reader = Reader(Path(path), full_paths)
    name = reader.name(layout.CONFIG)
    return parse_config(safe_io.read_text(reader.root, layout.CONFIG, label=name), name)


def parse_config(text: str, file: str = layout.CONFIG) -> dict:
    """config.yaml's text as the DSL document: bounded YAML that must be a mapping."""
    config = safe_io.parse_yaml(text, file)
    if not isinstance(config, dict):
        raise LocatedError(Problem(file, "(document)", "a mapping (the DSL document)",
                                   "an empty document" if config is None else typed(config)))
    return config


@dataclass(frozen=True)
class ClaimChecks:
    """What verification.json says of the folder's shipped claims: per level key its comparison
    (ClaimCheck; reliability's, made later, wins over levels'), and per level key whose comparison
    does not read, why; `unreadable`: why the whole file does not read ("" when it does or is absent)."""
    checks: dict[str, ClaimCheck] = field(default_factory=dict)
    unfit: dict[str, str] = field(default_factory=dict)
    unreadable: str = ""


def claim_checks(reader: Reader, name: str) -> ClaimChecks:
    """The comparisons of claims in the folder's verification.json, each read on its own: one that
    does not fit leaves only its level unchecked (it never voids the others' verdicts)."""
    try:
        found, where = reader.json(name), reader.name(name)
        stages = records.check(found, Verification.KIND, where).get("stages") if found is not None else None
    except (LocatedError, RecordError) as e:
        return ClaimChecks(unreadable=str(e)[:300])
    out = ClaimChecks()
    for stage in ("levels", "reliability"):  # reliability's comparison, made later, wins
        figures = stages.get(stage) if isinstance(stages, dict) else None
        compared = figures.get("claims") if isinstance(figures, dict) else None
        for key, value in (compared.items() if isinstance(compared, dict) else ()):
            level = layout.level_key(str(key))
            try:
                out.checks[level] = ClaimCheck.from_dict(value, f"{where}: stages.{stage}.claims.{str(key)[:80]}")
                out.unfit.pop(level, None)
            except RecordError as e:
                out.checks.pop(level, None)
                out.unfit[level] = str(e)[:300]
    return out


def max_reward_standing(data: Any, claimed: dict[str, float], verified: ClaimChecks | None,
                        envforge_made: bool = False) -> dict[str, tuple[bool, str]]:
    """Per level key with a max reward: (whether it may divide a normalized score, the note that goes
    with every score on it). A max envforge's verify wrote carries its `certainty`: "unknown" (the
    search found no reward) divides nothing; a lower bound or an unconfirmed bound divides, noted;
    "certified" counts only in a file with envforge's format stamp (`_certainty`).
    A shipped claim (no certainty) that verification.json found beaten or unreachable divides
    nothing (it is wrong); one it could not confirm, or that no verification checked in a folder
    envforge did not make (`envforge_made`: its manifest names an origin), is noted."""
    entries = data.get("levels") if isinstance(data, dict) and isinstance(data.get("levels"), dict) else {}
    # verify's certification counts only in a file envforge wrote (its format stamp): elsewhere a
    # "certified" entry is a foreign or hand-edited claim
    stamped = isinstance(data, dict) and data.get(records.FORMAT) == records.format_of(LevelMaxRewards.KIND)
    verified = verified or ClaimChecks()
    compared = verified.checks
    out = {}
    for raw_key, entry in entries.items():
        key = layout.level_key(str(raw_key))
        if key not in claimed:
            continue
        value, certainty = claimed[key], _certainty(entry, stamped)
        says_certainty = isinstance(entry, dict) and entry.get("certainty") is not None
        if certainty == "unknown":
            out[key] = (False, f"the max reward of {key} is unknown (verify's search found no reward); "
                               f"left out of normalized scores")
        elif certainty in ("lower_bound", "unconfirmed_bound"):
            out[key] = (True, f"the max reward of {key} ({value:g}) is {certainty.replace('_', ' ')}: "
                              f"not certified")
        elif certainty is None:
            check = compared.get(key)
            status = check.standing if check and check.claimed == value else None
            unread = verified.unfit.get(key) or verified.unreadable
            if status is None and unread:
                out[key] = (True, f"the claimed max reward of {key} ({value:g}) is not checked: verification.json's "
                                  f"comparison does not read ({unread})")
            elif status == "beaten":
                out[key] = (False, f"the claimed max reward of {key} ({value:g}) is beaten: envforge verify "
                                   f"scored {check.found}; left out of normalized scores")
            elif status == "unreachable":
                out[key] = (False, f"the claimed max reward of {key} ({value:g}) is unreachable: "
                                   f"{check.why or 'an exhaustive search scores only ' + str(check.found)}; "
                                   f"left out of normalized scores")
            elif status == "reached":
                out[key] = (True, f"the claimed max reward of {key} ({value:g}) is reached by envforge verify's "
                                  f"search, not proved: a lower bound")
            elif status == "unconfirmed":
                out[key] = (True, f"the claimed max reward of {key} ({value:g}) is unconfirmed: envforge verify "
                                  f"reached only {check.found}")
            elif status is not None and status not in ClaimCheck.STATUSES:  # a newer envforge's, or a forged one
                out[key] = (True, f"the claimed max reward of {key} ({value:g}) is not checked: verification.json "
                                  f"calls it {status[:40]!r}, which this envforge does not know")
            elif status != "confirmed" and (not envforge_made or says_certainty):  # a certainty not verify's
                out[key] = (True, f"the max reward of {key} ({value:g}) is the environment's own claim, not "
                                  f"checked by envforge verify")
    return out


def _certainty(entry: Any, stamped: bool) -> str | None:
    """verify's certainty of a level_max_rewards.json entry; None for a claim. An entry saying its max is
    uncertain ("unknown", "lower_bound", "unconfirmed_bound") is taken at its word whatever else it
    says; "certified" or "estimate" counts only in a file envforge wrote (`stamped`: its format) and
    an entry that reads as verify's (LevelMaxEntry); any other value, or an entry that does not fit
    (another tool using verify's field names for its own values), is a claim, never verify's
    certification."""
    raw = entry.get("certainty") if isinstance(entry, dict) else None
    if raw in UNCERTAIN:
        return raw
    if not stamped or raw not in LevelMaxEntry.CERTAINTIES:
        return None
    try:
        LevelMaxEntry.from_dict(entry, layout.LEVEL_MAX_REWARDS)
    except RecordError:
        return None
    return raw


def config_tags(config: Any) -> dict[str, str]:
    """The DSL's meta.tags (reward, observation, semantics); {} when it has none."""
    meta = config.get("meta") if isinstance(config, dict) else None
    tags = meta.get("tags") if isinstance(meta, dict) else None
    return _strings(tags) if isinstance(tags, dict) else {}


def _strings(tags: dict) -> dict[str, str]:
    return {str(k): str(v) for k, v in tags.items()}


class Reader:
    """Reads files of one folder through safe_io, naming them as the caller wants."""

    def __init__(self, root: Path, full_paths: bool = True):
        self.root = root
        self.full_paths = full_paths

    def name(self, rel: str) -> str:
        return str(self.root / rel) if self.full_paths else rel

    def text(self, rel: str, limit: int = safe_io.MAX_BYTES) -> str:
        """The file's text, "" when it does not exist (a link or a special file is an error)."""
        if not safe_io.exists(self.root, rel):
            return ""
        return safe_io.read_text(self.root, rel, limit, self.name(rel))

    def json(self, rel: str) -> Any:
        """The file's JSON value, None when it does not exist."""
        if not safe_io.exists(self.root, rel):
            return None
        return safe_io.load_json(self.root, rel, label=self.name(rel))


def difficulties(data: Any) -> dict[str, DifficultyProfile]:
    """level key -> the difficulty profile of level_max_rewards.json's entry; an entry's profile that
    does not fit the shape is left out (the file may come from anywhere; the max is read apart)."""
    levels = data.get("levels") if isinstance(data, dict) else None
    out = {}
    for key, entry in (levels.items() if isinstance(levels, dict) else ()):
        if isinstance(entry, dict) and isinstance(entry.get("difficulty"), dict):
            try:
                out[layout.level_key(key)] = DifficultyProfile.from_dict(entry["difficulty"], "difficulty")
            except RecordError:
                continue
    return out


def claimed_max_rewards(data: Any, file: str = layout.LEVEL_MAX_REWARDS) -> dict[str, float]:
    """Max reward per level key from level_max_rewards.json (AutoEnv C.1 shape: {"levels":
    {name: {"max_reward": x} | x}}). Each must be a finite number, 0 or at least 1e-6: NaN,
    Infinity or 1e-300 would poison every normalised score."""
    if data is None:
        return {}
    levels = data.get("levels") if isinstance(data, dict) else None
    if levels is None:
        return {}
    if not isinstance(levels, dict):
        raise LocatedError(Problem(file, "levels", "a mapping of level name to max reward", typed(levels)))
    out: dict[str, float] = {}
    for key, entry in levels.items():
        value = entry.get("max_reward") if isinstance(entry, dict) else entry
        where = f"levels.{key}" + (".max_reward" if isinstance(entry, dict) else "")
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value < 0 or 0 < value < SMALLEST_MAX_REWARD):
            raise LocatedError(Problem(file, where, f"a finite number, 0 or from {SMALLEST_MAX_REWARD:g} up",
                                       typed(value)))
        out[layout.level_key(key)] = float(value)
    return out
