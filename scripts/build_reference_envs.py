"""Rebuild the generated artefacts of the hand-written reference environments, by the product's path.

    python scripts/build_reference_envs.py               # every env under generated_envs/reference/
    python scripts/build_reference_envs.py crate_dock    # only the named ones

For each environment, `envforge verify --write-levels` (its library call, verify_env with
write_levels and write): seeds 1, 2, ... of env_generate.generate_level give levels/level_01..10
and val_levels/level_11..15, each accepted by the validator, fit and distinct from the others;
level_max_rewards.json holds verify's certified max rewards (its one builder of that record); the
environment must be accepted. Then manifest.json afresh, with every shipped file's sha256, and no
verification.json (it names this machine's folder and timings: not a shipped file). A rebuild whose
max rewards come out the same keeps the file's timestamp: a rebuild without edits changes no file.
Run it after editing a reference environment (or the search verify certifies with), then commit
the rewritten files.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from envforge.pipeline import layout, manifest
from envforge.pipeline import records as files
from envforge.pipeline.envfolder.spec import read_config
from envforge.pipeline.kinds import LevelMaxRewards
from envforge.pipeline.verify import VerifyRunOptions, verify_env

REFERENCE = Path(__file__).resolve().parents[1] / "generated_envs" / "reference"
THEMES = {
    "crate_dock": "Sokoban-lite: push every crate onto a dock in a small walled warehouse; "
                  "fully observable, reward 1 when all crates are docked.",
    "tide_pool": "A tide-pool explorer sees only a 3x3 window; rising tide floods low tiles over time; "
                 "collect shells and reach high ground before the tide peaks.",
}


def write_reference_artifacts(env_dir: Path) -> None:
    """Regenerate levels, level_max_rewards.json and manifest.json of one env."""
    path = env_dir / layout.LEVEL_MAX_REWARDS
    previous = files.read(path, LevelMaxRewards)
    result = verify_env(env_dir, options=VerifyRunOptions(write_levels=True, write=True, progress=print))
    (env_dir / layout.VERIFICATION).unlink(missing_ok=True)
    if not result.accepted:
        raise SystemExit(f"{env_dir.name}: expected verify to accept the reference environment, found "
                         f"{result.reason}")
    built = files.read(path, LevelMaxRewards)
    if built.same_levels(previous):  # an unchanged result keeps its timestamp
        built.calculation_timestamp = previous.calculation_timestamp
        files.write(path, built)
    manifest.reference(env_dir, THEMES[env_dir.name], read_config(env_dir)["meta"]["tags"])
    print(f"{env_dir.name}: {len(built.levels)} levels, max rewards {[e.max_reward for e in built.levels.values()]}")


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
