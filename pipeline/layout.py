"""The one place that knows the environment folder layout (AutoEnv paper B.3 + manifest.json).

    ENV/
      env_main.py            the SkinEnv subclass (rules of the world)
      env_obs.py             observation policy (optional when config.observation names a built-in)
      env_generate.py        level generator: generate_level(seed, config) -> state
      env_validator.py       validate_level(state) -> (ok, issues); max_reward(state) -> float
      config.yaml            the DSL document
      agent_instruction.txt  what the agent is told
      action_space.txt       the actions, as the agent sees them
      levels/*.yaml          test levels
      val_levels/*.yaml      validation levels
      level_max_rewards.json certified max reward per level
      manifest.json          theme, tags, hashes, costs, verification results
      skins/<name>.py        extra renderings over the same dynamics: render(omega, env) -> str
                             (envforge reskin; listed under manifest.json "skins")
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline import safe_io

ENV_MAIN = "env_main.py"
ENV_OBS = "env_obs.py"
ENV_GENERATE = "env_generate.py"
ENV_VALIDATOR = "env_validator.py"
CONFIG = "config.yaml"
AGENT_INSTRUCTION = "agent_instruction.txt"
ACTION_SPACE = "action_space.txt"
LEVELS = "levels"
VAL_LEVELS = "val_levels"
GENERATED_LEVELS = "_generated"  # where the runtime saves levels made from a seed
LEVEL_MAX_REWARDS = "level_max_rewards.json"
MANIFEST = "manifest.json"
VERIFICATION = "verification.json"
SKINS = "skins"
SKIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # skins/<name>.py

# What the coding agent writes (the rules of the world and what the agent is told).
AGENT_FILES = (ENV_MAIN, ENV_OBS, ENV_GENERATE, ENV_VALIDATOR, AGENT_INSTRUCTION, ACTION_SPACE)

# Generation: OUT/<name>/ accepted, OUT/_rejected/<name>/ rejected, OUT/_work/<name>/ in progress.
WORK_ROOT = "_work"
REJECTED_ROOT = "_rejected"
RUN_DB = "envforge.sqlite"
THEME_FILE = "theme.json"
DESIGN = "design.md"
CALL_JOURNAL = "calls.jsonl"
TRAJECTORY = "trajectory.jsonl"
REJECTION = "rejection.json"
# What generate and the commands leave in or beside an environment folder that the environment does
# not need to run: a copy of it for another tool (export) leaves them out.
NOT_SHIPPED = (CALL_JOURNAL, TRAJECTORY, RUN_DB, RUN_DB + "-wal", RUN_DB + "-shm", RUN_DB + "-journal",
               ".envforge.lock", WORK_ROOT, REJECTED_ROOT, GENERATED_LEVELS, "error.txt", "__pycache__")

# The records envforge writes into an env or work folder, and their kinds (pipeline/records.py).
# Only envforge writes them: the coding agent may not.
RECORD_KINDS = {MANIFEST: "manifest", VERIFICATION: "verification", LEVEL_MAX_REWARDS: "level_max_rewards",
                REJECTION: "rejection", THEME_FILE: "theme", CALL_JOURNAL: "model_call", TRAJECTORY: "coding_step"}

REQUIRED_FILES = (ENV_MAIN, CONFIG)
CODE_FILES = (ENV_MAIN, ENV_OBS, ENV_GENERATE, ENV_VALIDATOR)
LEVEL_SPLITS = {"test": LEVELS, "val": VAL_LEVELS}


@dataclass(frozen=True)
class EnvDir:
    """An environment folder on disk, seen from the parent process (never imported)."""

    path: Path

    @classmethod
    def at(cls, path: str | Path) -> "EnvDir":
        return cls(Path(path).resolve())

    @property
    def name(self) -> str:
        return self.path.name

    def file(self, name: str) -> Path:
        return self.path / name

    def missing_required(self) -> list[str]:
        return [name for name in REQUIRED_FILES if not safe_io.exists(self.path, name)]

    def levels(self, split: str = "test") -> list[str]:
        """Level ids of a split, as paths relative to the folder ("levels/level_01.yaml"); links
        are not levels (a link in place of the folder is a LocatedError)."""
        folder = LEVEL_SPLITS[split]
        return [f"{folder}/{name}" for name in safe_io.list_files(self.path, folder, ".yaml", str(self.path / folder))]

    def all_levels(self) -> list[str]:
        return self.levels("test") + self.levels("val")

    def python_files(self) -> list[Path]:
        return sorted(
            self.path / rel for rel in safe_io.walk(self.path, frozenset({"__pycache__"})) if rel.endswith(".py")
        )

    def skins(self) -> list[str]:
        """Names of the folder's skins (skins/<name>.py; names starting with '_' are not skins)."""
        return [name[:-3] for name in safe_io.list_files(self.path, SKINS, ".py") if not name.startswith("_")]

    def skin_file(self, name: str) -> Path:
        return self.path / SKINS / f"{name}.py"

    def read_json(self, name: str) -> dict | None:
        """A JSON file of the folder, bounded and never through a link; None when it is absent. An
        envforge record (RECORD_KINDS) comes without its format fields, refused when a newer
        envforge wrote it."""
        from envforge.pipeline import records

        if not safe_io.exists(self.path, name):
            return None
        data = safe_io.load_json(self.path, name)
        if name in RECORD_KINDS and isinstance(data, dict):
            return records.check(data, RECORD_KINDS[name], self.path / name)
        return data

    def is_env(self) -> bool:
        return self.path.is_dir() and not self.missing_required()

    def file_hashes(self) -> dict[str, str]:
        files = sorted(safe_io.walk(self.path, frozenset({"__pycache__", GENERATED_LEVELS})))
        return {rel: safe_io.sha256(self.path, rel) for rel in files if Path(rel).name != MANIFEST}


@dataclass(frozen=True)
class OutputDir:
    """The output folder of `envforge generate`. A theme's folder moves from work/ to accepted/
    or rejected/ by one rename, so no half-written folder is ever among the accepted ones."""

    root: Path

    @property
    def db(self) -> Path:
        return self.root / RUN_DB

    def work(self, name: str) -> Path:
        return self.root / WORK_ROOT / name

    def accepted(self, name: str) -> Path:
        return self.root / name

    def rejected(self, name: str) -> Path:
        return self.root / REJECTED_ROOT / name


def find_envs(path: str | Path) -> list[EnvDir]:
    """Accepted environment folders at `path`: the folder itself, else the environment folders
    among its children, else among its grandchildren (generated_envs/ holding reference/ and a
    generation output). Never inside a folder whose name starts with "_" (a generation's
    _rejected/ and _work/, _generated levels) or is "rejected", nor one whose name holds a
    control character (printed, a line break or an escape in it would forge a line of its own)."""
    root = EnvDir.at(path)
    if root.is_env():
        return [root]
    for depth in (1, 2):
        pattern = "/".join(["*"] * depth)
        found = [EnvDir.at(p) for p in sorted(root.path.glob(pattern))
                 if not any(part.startswith("_") or part == "rejected" or not part.isprintable()
                            for part in p.relative_to(root.path).parts)
                 and EnvDir.at(p).is_env()]
        if found:
            return found
    return []


def _level_key(name: str) -> str:
    """level_max_rewards.json keys may be 'level_01.yaml' or 'levels/level_01.yaml'."""
    return Path(name).name


def level_key(level_id: str) -> str:
    """The key a level id has in level_max_rewards.json."""
    return _level_key(level_id)

