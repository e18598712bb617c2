"""Harbor tasks: `envforge export harbor ENV_DIR… --out DIR` writes one task per level, and the task's
image plays and scores that level with `python -m envforge.pipeline.commands.harbor_task play|score`. This
module is the one place that knows the task's layout, on both sides.

DIR/NAME-level_01/ is a task as Harbor reads one (harbor.models.task: task.toml, instruction.md,
environment/, tests/, solution/):

    task.toml              the level, its max reward and note under [metadata]; the verifier runs in a
                           container of its own (environment_mode "separate"), the agent as a non-root user
    instruction.md         what envforge's agents are told (templates/harbor/instruction.md.j2): the
                           environment's instruction and action space, how to act, the first turn's prompt
    environment/Dockerfile installs envforge-rl (--wheel FILE, else the release from the index) and
                           copies environment/envforge/ to /envforge: env/ (the folder, copied as data),
                           task.json (HarborTask) and bin/envforge-play
    tests/test.sh          replays the episode and writes its normalized reward to /logs/verifier/reward.txt
    solution/solve.sh      the oracle: the level's certified max-reward witness (level_max_rewards.json,
                           envforge verify's search), each action sent through envforge-play

In the container the agent acts with `envforge-play ACTION`: each call appends what it was sent to
/logs/artifacts/envforge-episode.jsonl (HarborTurn lines; Harbor carries its artifacts folder to a
separate verifier) and replays the log in a fresh sandbox worker (the environment's steps are
deterministic under a level and seed: verify's determinism check), so no process outlives a
command. `score` replays the same log in the verifier's own, fresh container: an episode is
StepwiseEpisode under evaluate's rules, so its normalized reward is the one `envforge evaluate`
reports for the same actions. An environment that fails in the sandbox is an infrastructure fault:
`score` exits 1 and writes no reward (Harbor reports the trial's verifier as failed), as evaluate
leaves such an episode out of its scores.

ENVFORGE_HARBOR_ROOT maps the image's absolute paths under a folder (tests run a task's scripts
without a container that way); unset, they are the image's own.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from envforge.pipeline import DISTRIBUTION, __version__, layout, quoting, records
from envforge.pipeline.api.environment import Environment
from envforge.pipeline.api.export import copy_folder, distinct, environments
from envforge.pipeline.api.options import Options, option
from envforge.pipeline.api.values import one_of
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.episode import INFRASTRUCTURE
from envforge.pipeline.evaluate.stepwise import REPLY_CHARS, StepwiseEpisode
from envforge.pipeline.kinds import HarborTask, HarborTurn, RecordError
from envforge.pipeline.prompts import render

# In the image (under ENVFORGE_HARBOR_ROOT when it is set)
HOME = "/envforge"  # environment/envforge/ of the task
TASK_FILE, ENV_FOLDER, PLAY = "task.json", "env", "bin/envforge-play"
EPISODE = "/logs/artifacts/envforge-episode.jsonl"  # Harbor's artifacts folder: it reaches a separate verifier
REWARD = "/logs/verifier/reward.txt"  # where Harbor's verifier reads the reward
RECORD = "/logs/verifier/envforge-episode.json"  # the scored episode's record (EpisodeRecord), for a reader
ROOT_VARIABLE = "ENVFORGE_HARBOR_ROOT"
AGENT = "harbor"  # the agent field of the episode's record
DEFAULT_BASE_IMAGE = "python:3.11-slim"
SOLVED = 1 - 1e-9
AGENT_SECONDS = 1800.0  # task.toml's [agent] timeout_sec (Harbor's run can scale it)

TASK_TOML = '''schema_version = "1.4"

[task]
name = {name}
description = {description}
keywords = {keywords}

[metadata]
envforge_version = {version}
environment = {environment}
level = {level}
split = {split}
max_reward = {max_reward}
max_reward_note = {max_note}
oracle_steps = {oracle_steps}
{difficulty}
[verifier]
# a container of its own: the agent's episode log reaches it as an artifact, nothing else of the agent's
environment_mode = "separate"
timeout_sec = 600.0

[agent]
timeout_sec = {agent_seconds}
user = "agent"

[environment]
build_timeout_sec = 900.0
cpus = 1
memory_mb = 2048
'''

DOCKERFILE = '''# One level of the envforge environment in /envforge/env, as a Harbor task (envforge export harbor,
# envforge {version}). The agent acts with envforge-play, which plays the level in envforge's sandbox.
FROM {base_image}
RUN apt-get update && apt-get install -y --no-install-recommends libseccomp2 && rm -rf /var/lib/apt/lists/*
{install}
COPY envforge/ /envforge/
RUN useradd --create-home agent && chmod 0755 /envforge/bin/envforge-play \\
    && mkdir -p /logs/artifacts /logs/verifier && chmod 1777 /logs/artifacts
ENV PATH="/envforge/bin:$PATH"
WORKDIR /home/agent
'''

PLAY_SCRIPT = '''#!/bin/sh
# envforge-play ACTION: one action of this task's level, played in envforge's sandbox; prints what
# the environment shows next. `envforge-play --show` prints it again without acting.
exec python3 -m envforge.pipeline.commands.harbor_task play "$@"
'''

TEST_SCRIPT = '''#!/bin/bash
# Replays the actions the agent sent through envforge-play (/logs/artifacts/envforge-episode.jsonl) on
# the level, in envforge's sandbox, and writes the episode's normalized reward (total / the level's
# certified max reward, clipped to [0, 1]) to /logs/verifier/reward.txt; its record to
# /logs/verifier/envforge-episode.json. Exits 1, writing no reward, when the environment fails.
exec python3 -m envforge.pipeline.commands.harbor_task score
'''

SOLVE_HEAD = '''#!/bin/bash
# The oracle: the level's certified max-reward witness ({steps} actions, {source}),
# each sent through envforge-play as an agent sends one.
set -euo pipefail
'''


def image_path(path: str) -> Path:
    """An absolute path of the image, under ENVFORGE_HARBOR_ROOT when that is set."""
    root = os.environ.get(ROOT_VARIABLE)
    return Path(root) / path.lstrip("/") if root else Path(path)


# -- export ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HarborOptions(Options):
    """`envforge export harbor`'s options (the other formats take none)."""

    SECTION = "harbor"
    split: str = option("test", one_of(*layout.LEVEL_SPLITS), help="the levels made tasks: test (levels/) or val "
                        "(val_levels/) (default {default})")
    wheel: str | None = option(None, metavar="FILE", help=f"a built {DISTRIBUTION} wheel the task images install "
                               "(`pip wheel --no-deps .` in a checkout); default: the release from the package index")
    base_image: str = option(DEFAULT_BASE_IMAGE, metavar="IMAGE", help="the images' base, with Python 3.11+ (default "
                             "{default}; Harbor's lint asks for a @sha256: digest)")


def export_harbor(env_dirs: list[str], out: str | Path, options: HarborOptions = HarborOptions()) -> list[Path]:
    """One Harbor task per level of `options.split` whose max reward can divide a score and whose
    witness scores it; returns their folders. A level left out is named on stderr, with why."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*", options.base_image):
        raise UserError(f"--base-image: expected an image reference (name[:tag][@sha256:digest]), found "
                        f"{options.base_image!r}")
    wheel = _wheel(options.wheel)
    envs = [EnvSpec.open(e.path).playable() for e in environments(env_dirs)]
    slugs = [_slug(spec.name) for spec in envs]
    distinct(slugs, "task names")
    out = Path(out)
    written = []
    for spec, slug in zip(envs, slugs):
        for level, max_reward, note in Environment(spec.path).scored_levels(options.split, None, "the Harbor tasks"):
            witness = _witness(spec, level, max_reward, note)
            if witness is None:
                continue
            task = out / f"{slug}-{'val-' if options.split == 'val' else ''}{Path(level).stem}"
            if task.exists():
                raise UserError(f"--out {out}: expected no {task.name}/ there yet (nothing is overwritten), found one")
            _write_task(task, spec, level, max_reward, note, witness, options, wheel)
            written.append(task)
    if not written:
        raise UserError(f"{', '.join(env_dirs)}: expected levels under {layout.LEVEL_SPLITS[options.split]}/ with a "
                        "usable max reward and a witness that scores it, found none (run envforge verify --write)")
    return written


def _wheel(path: str | None) -> Path | None:
    if path is None:
        return None
    wheel = Path(path)
    if not (wheel.is_file() and not wheel.is_symlink() and re.fullmatch(r"[A-Za-z0-9_.+-]+\.whl", wheel.name)):
        raise UserError(f"--wheel {path}: expected a wheel file (NAME-VERSION-TAGS.whl, as `pip wheel --no-deps .` "
                        "builds one), found " + ("none" if not wheel.exists() else "another kind of file or name"))
    return wheel


def _slug(name: str) -> str:
    """A task name's part from an environment's name: Harbor's org/name characters only."""
    return re.sub(r"[^a-z0-9._-]", "_", name.lower(), flags=re.ASCII).lstrip("._-")[:80] or "env"


def _witness(spec: EnvSpec, level: str, max_reward: float, note: str) -> list[dict] | None:
    """The level's witness from level_max_rewards.json, when an episode of its actions scores the
    max (normalized 1) under evaluate's rules; None, said on stderr, when there is none or it does not."""
    try:
        entries = (spec.dir.read_json(layout.LEVEL_MAX_REWARDS) or {}).get("levels") or {}
    except (UserError, RecordError, AttributeError) as e:
        return _left_out(spec, level, f"{layout.LEVEL_MAX_REWARDS} does not read: {e}")
    entry = next((v for k, v in entries.items() if layout.level_key(str(k)) == layout.level_key(level)), None)
    witness = entry.get("witness") if isinstance(entry, dict) else None
    if not (isinstance(witness, list) and 0 < len(witness) <= spec.max_steps
            and all(isinstance(a, dict) and isinstance(a.get("action"), str)
                    and isinstance(a.get("params", {}), dict) for a in witness)):
        return _left_out(spec, level, f"no witness in {layout.LEVEL_MAX_REWARDS} (expected a list of 1 to "
                                      f"{spec.max_steps} actions)")
    witness = [{"action": a["action"], "params": dict(a.get("params") or {})} for a in witness]
    episode = StepwiseEpisode(spec, level, max_reward, note)
    try:
        episode.start()
        for action in witness:
            episode.act(action)
        record = episode.record(AGENT)
    finally:
        episode.close()
    if record.stop_reason in INFRASTRUCTURE:
        raise UserError(f"{spec.path}: {level}: the environment failed replaying its witness in the sandbox: "
                        f"{record.stop_reason}: {record.stop_detail[:300]}")
    if (record.normalized or 0) < SOLVED:
        return _left_out(spec, level, f"its witness scores {record.total_reward:g} of {max_reward:g} "
                                      f"({record.stop_reason} after {record.steps} step(s))")
    return witness[:record.steps]


def _left_out(spec: EnvSpec, level: str, why: str) -> None:
    print(f"envforge: {spec.name}/{layout.level_key(level)} left out of the Harbor tasks: {why}", file=sys.stderr)
    return None


def _difficulty_toml(profile) -> str:
    """task.toml's [metadata] lines of the level's difficulty profile (pipeline/difficulty.py); none unprofiled."""
    if profile is None:
        return ""
    shortest = profile.shortest_witness
    return (f"difficulty = {int(profile.score)}\ndifficulty_band = {quoting.toml(profile.band)}\n"
            f"difficulty_score_version = {int(profile.score_version)}\n"
            f"shortest_witness = {float(shortest.value or 0)!r}\nshortest_witness_exact = "
            f"{'true' if shortest.exact else 'false'}\n")


def _write_task(task: Path, spec: EnvSpec, level: str, max_reward: float, note: str, witness: list[dict],
                options: HarborOptions, wheel: Path | None) -> None:
    home = task / "environment" / "envforge"
    copy_folder(spec.path, home / ENV_FOLDER)
    records.write(home / TASK_FILE, HarborTask(spec.name, level, max_reward, note))
    _script(home / PLAY, PLAY_SCRIPT)
    if wheel is not None:
        (task / "environment" / "wheels").mkdir(parents=True)
        shutil.copyfile(wheel, task / "environment" / "wheels" / wheel.name)
        install = (f"COPY wheels/ /tmp/envforge-wheels/\nRUN python3 -m pip install --no-cache-dir "
                   f"/tmp/envforge-wheels/{wheel.name} && rm -rf /tmp/envforge-wheels")
    else:
        install = f"RUN python3 -m pip install --no-cache-dir {quoting.shell(f'{DISTRIBUTION}=={__version__}')}"
    (task / "environment" / "Dockerfile").write_text(
        DOCKERFILE.format(version=__version__, base_image=options.base_image, install=install), encoding="utf-8")
    episode = StepwiseEpisode(spec, level, max_reward, note)
    try:
        first = episode.start()
    finally:
        episode.close()
    example = spec.actions[0].name if spec.actions else "<action_name>"
    (task / "instruction.md").write_text(render(
        "harbor/instruction.md.j2", instruction=spec.instruction, action_space=spec.action_space,
        example_name=example, max_steps=spec.max_steps, first_turn=first), encoding="utf-8")
    about = (f"Level {level} of the envforge environment {quoting.one_line(spec.name)} (envforge export harbor, "
             f"envforge {__version__}).")
    tags = ["envforge", *(str(v) for v in spec.tags.values())][:16]
    (task / "task.toml").write_text(TASK_TOML.format(
        name=quoting.toml(f"envforge/{task.name}"), description=quoting.toml(about),
        keywords="[" + ", ".join(quoting.toml(t) for t in tags) + "]", version=quoting.toml(__version__),
        environment=quoting.toml(spec.name), level=quoting.toml(level), split=quoting.toml(options.split),
        max_reward=repr(float(max_reward)), max_note=quoting.toml(note), oracle_steps=len(witness),
        difficulty=_difficulty_toml(spec.difficulty(level)), agent_seconds=repr(AGENT_SECONDS)), encoding="utf-8")
    _script(task / "tests" / "test.sh", TEST_SCRIPT)
    source = f"envforge verify's search, {layout.LEVEL_MAX_REWARDS}"
    _script(task / "solution" / "solve.sh", SOLVE_HEAD.format(steps=len(witness), source=source) + "".join(
        f"envforge-play {quoting.shell(json.dumps(action))}\n" for action in witness))


def _script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


# -- in the image: play and score ------------------------------------------------------------------

class _Task:
    """The task of this image: its HarborTask, its environment, and its episode log."""

    def __init__(self):
        home = image_path(HOME)
        self.task = records.read(home / TASK_FILE, HarborTask)
        if self.task is None:
            raise UserError(f"{home / TASK_FILE}: expected this Harbor task's {TASK_FILE} (written by envforge "
                            "export harbor), found none")
        self.spec = EnvSpec.open(home / ENV_FOLDER).playable()
        self.log = image_path(EPISODE)

    def turns(self) -> list[str]:
        """The texts of the episode log's turns; a log that does not read is a UserError naming it."""
        try:
            size = self.log.lstat().st_size
        except FileNotFoundError:
            return []
        # A turn keeps REPLY_CHARS of its text; JSON may write a character as 6 bytes (\\uXXXX), plus its fields.
        limit = (self.spec.max_steps + 1) * (6 * REPLY_CHARS + 512)
        if size > limit:
            raise UserError(f"{self.log}: expected an episode log of at most {limit} bytes "
                            f"({self.spec.max_steps} turns), found {size}")
        return [turn.text for _, turn in records.lines(self.log, HarborTurn)]

    def replay(self, texts: list[str]) -> tuple[StepwiseEpisode, str]:
        """A started episode with `texts` played (those after its end ignored), and what it shows now."""
        episode = StepwiseEpisode(self.spec, self.task.level, self.task.max_reward, self.task.max_note,
                                  skin=self.task.skin)
        shown = episode.start()
        for text in texts:
            if episode.done:
                break
            shown = episode.act_text(text)
        return episode, shown


def play(text: str | None) -> int:
    """`envforge-play TEXT`: one turn (TEXT as `envforge play` reads an action; text that is no action
    counts as a turn that held none) appended to the log; prints what the player is shown next.
    With no TEXT, prints what it is shown now. Exit 0; 2 when TEXT was no action or the episode had
    already ended (nothing played); 1 when the environment failed."""
    task = _Task()
    task.log.parent.mkdir(parents=True, exist_ok=True)
    with open(task.log, "a", encoding="utf-8") as lock:  # one player's turn at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        episode, shown = task.replay(task.turns())
        try:
            status = 0
            if text is not None:
                if episode.done:
                    shown, status = "Nothing was played: the episode is over.\n\n" + shown, 2
                else:
                    turns = episode.tracker.turns
                    shown = episode.act_text(text[:REPLY_CHARS])
                    records.append(task.log, HarborTurn(text[:REPLY_CHARS]), durable=True)
                    log = episode.tracker.turn_log
                    status = 2 if len(log) > turns and log[-1].get("action") is None else 0
            if episode.tracker.stop_reason in INFRASTRUCTURE:
                status = 1
        finally:
            episode.close()
    print(shown)
    return status


def score() -> int:
    """Replay the log and write the normalized reward where Harbor reads it (0 when the agent sent
    nothing); exit 1, writing no reward, when the environment failed."""
    task = _Task()
    try:
        texts, unread = task.turns(), ""
    except (UserError, RecordError) as e:  # the agent's own log, made unreadable: no answer
        texts, unread = [], str(e)[:500]
    episode, _ = task.replay(texts)
    try:
        record = episode.record(AGENT, env=task.task.environment)
    finally:
        episode.close()
    if unread:
        record = dataclasses.replace(record, stop_detail=f"the episode log does not read: {unread}")
    if record.stop_reason in INFRASTRUCTURE:
        print(f"envforge: the environment failed replaying the episode: {record.stop_reason}: "
              f"{record.stop_detail[:500]}", file=sys.stderr)
        return 1
    reward = record.normalized if record.normalized is not None else 0.0
    records.write(image_path(RECORD), record)
    records.write_text(image_path(REWARD), f"{reward:g}\n")
    print(f"envforge: {task.task.environment} {task.task.level}: {record.stop_reason} after {record.steps} step(s), "
          f"total reward {record.total_reward:g} of {task.task.max_reward:g}: normalized {reward:g}")
    return 0
