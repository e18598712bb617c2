"""Rebuild the generated artefacts of the hand-written reference environments.

    python scripts/build_reference_envs.py               # every env under generated_envs/reference/
    python scripts/build_reference_envs.py crate_dock    # only the named ones

For each environment: levels/level_01..10 (seeds 1-10) and val_levels/level_11..15 (seeds 11-15)
from env_generate.generate_level, each checked to be valid (env_validator.validate_level),
distinct from the others and identical when generated twice; level_max_rewards.json in the
AutoEnv C.1 shape from env_validator.max_reward; manifest.json with every shipped file's sha256.
Run it after editing a reference environment, then commit the rewritten files.

Each environment is built in a child process: every env folder has modules named env_main,
env_generate, ..., and they must not meet in one interpreter.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pipeline import layout, manifest
from pipeline import records as files
from pipeline.envfolder.spec import read_config
from pipeline.kinds import LevelMaxEntry, LevelMaxRewards
from pipeline.runtime import save_level, state_hash

REFERENCE = Path(__file__).resolve().parents[1] / "generated_envs" / "reference"
SPLITS = {layout.LEVELS: range(1, 11), layout.VAL_LEVELS: range(11, 16)}
THEMES = {
    "crate_dock": "Sokoban-lite: push every crate onto a dock in a small walled warehouse; "
                  "fully observable, reward 1 when all crates are docked.",
    "tide_pool": "A tide-pool explorer sees only a 3x3 window; rising tide floods low tiles over time; "
                 "collect shells and reach high ground before the tide peaks.",
}
METHODS = {
    "crate_dock": ("validator_analytic", "binary: the solve reward when breadth-first search over "
                   "(agent, crates) docks every crate within max_steps, else 0"),
    "tide_pool": ("validator_search", "exact: exhaustive search over (position, shells left) per step "
                  "of every action sequence; shells reachable in time plus the peak bonus if survivable"),
}


def write_reference_artifacts(env_dir: Path) -> None:
    """Regenerate levels, level_max_rewards.json and manifest.json of one env (in this process)."""
    sys.path.insert(0, str(env_dir))
    import env_generate
    import env_validator

    config = read_config(env_dir)
    levels, seen = {}, {}
    for folder, seeds in SPLITS.items():
        for seed in seeds:
            state = env_generate.generate_level(seed, config)
            name = f"level_{seed:02d}.yaml"
            if state_hash(state) != state_hash(env_generate.generate_level(seed, config)):
                raise SystemExit(f"{env_dir.name}: seed {seed} gave two different levels")
            ok, issues = env_validator.validate_level(state)
            if not ok:
                raise SystemExit(f"{env_dir.name}: {name} rejected by the validator: {issues}")
            if state_hash(state) in seen:
                raise SystemExit(f"{env_dir.name}: {name} is identical to {seen[state_hash(state)]}")
            seen[state_hash(state)] = name
            levels[(folder, name)] = (seed, state)

    for folder in SPLITS:
        for old in (env_dir / folder).glob("level_*.yaml"):
            old.unlink()
    method, notes = METHODS[env_dir.name]
    entries = {}
    for (folder, name), (seed, state) in levels.items():
        save_level(env_dir / folder / name, state)
        entries[name] = LevelMaxEntry(float(env_validator.max_reward(state)), method, notes,
                                      extra={"split": folder, "seed": seed})
    _write_max_rewards(env_dir, entries)
    manifest.reference(env_dir, THEMES[env_dir.name], config["meta"]["tags"])
    print(f"{env_dir.name}: {len(entries)} levels, max rewards {[e.max_reward for e in entries.values()]}")


def _write_max_rewards(env_dir: Path, entries: dict[str, LevelMaxEntry]) -> None:
    path = env_dir / layout.LEVEL_MAX_REWARDS
    data = LevelMaxRewards.build(env_dir.name, entries, "env_validator.max_reward on each level as generated "
                                 "(scripts/build_reference_envs.py)", time.strftime("%Y-%m-%d %H:%M:%S"))
    previous = files.read(path, LevelMaxRewards)
    if data.same_levels(previous):  # an unchanged result keeps its timestamp: a rebuild without edits changes no file
        data.calculation_timestamp = previous.calculation_timestamp
    files.write(path, data)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--in-process"]:
        write_reference_artifacts(Path(argv[1]))
        return 0
    names = argv or sorted(p.name for p in REFERENCE.iterdir() if (p / layout.ENV_MAIN).is_file())
    failed = [n for n in names
              if subprocess.run([sys.executable, __file__, "--in-process", str(REFERENCE / n)]).returncode]
    if failed:
        print(f"build failed for: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
