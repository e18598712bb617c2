"""A person plays one level of an environment in the terminal (or replays a file of actions), the
environment in the sandbox: the library call under `envforge play` and `envforge review play`.
EnvSpec.level names a level of a folder as a person types it (envforge.Environment uses it too)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from envforge.pipeline import layout
from envforge.pipeline.api.options import ExecutorOptions, Options, group, option
from envforge.pipeline.api.values import SEED
from envforge.pipeline.envfolder.action_text import ActionText
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate.episode import capped
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import EnvClient
from envforge.pipeline.sandbox.outside.executor import running_on

# What play prints of one observation: a screenful many times over, but not an env's 100 MB.
SHOWN_CHARS = 64 * 1024
HELP = "Type an action (e.g. `move north`, `move direction=north` or JSON), `?` for the actions, `quit` to stop."


@dataclasses.dataclass(frozen=True)
class PlayOptions(Options):
    level: str | None = option(None, exclusive="level", help="level id: level_01, levels/level_01.yaml or "
                               "val_levels/level_11 (default: the first test level)")
    seed: int | None = option(None, SEED, exclusive="level", help="play a level generated from this seed instead")
    actions: str | None = option(None, metavar="FILE",
                                 help="replay actions from FILE, one per line, non-interactively")
    executor: ExecutorOptions = group(ExecutorOptions)


def play(env_dir: str, options: PlayOptions) -> int:
    """Play in the terminal; the exit status (0 played, 1 the environment failed, 2 a replayed
    line that is no action)."""
    if options.level is not None and options.seed is not None:
        raise UserError("expected one of --level ID or --seed N, found both")
    env = EnvSpec.open(env_dir)
    level = None if options.seed is not None else env.level(options.level)
    space = ActionText(env.actions)
    lines = _action_lines(options.actions, space) if options.actions else None
    try:
        with running_on(options.executor.start()), EnvClient.open(env) as client:
            return _play(env, client, space, level, options.seed, lines)
    except SandboxFailure as f:
        print(f"\nThe environment failed: {f}", file=sys.stderr)
        if f.output.strip():
            print(f"Its output ended with:\n{f.output.strip()[-1000:]}", file=sys.stderr)
        return 1


def _action_lines(path: str, space: ActionText) -> list[str]:
    """The file's actions, every one parsed before the environment starts: a line that is no action
    is an error naming its line, and no step is played."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"--actions {path}: expected a readable UTF-8 text file, found {e}") from None
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#") or line in ("?", "help"):
            continue
        if line in ("quit", "exit"):
            break
        try:
            space.parse(line)
        except ValueError as e:
            raise UserError(
                f"--actions {path}:{number}: expected an action ({', '.join(space.space.names) or 'none declared'}"
                f", with its parameters), found {str(capped(line, 200, 'more'))!r}: {e}"
            ) from None
        lines.append(line)
    return lines


def _shown(text) -> str:
    return str(capped(text, SHOWN_CHARS, "not shown"))


def _play(env, client: EnvClient, space: ActionText, level, seed, lines) -> int:
    max_steps = client.max_steps  # config.yaml's, never the worker's word
    if env.instruction:
        print(env.instruction, "\n")
    print("Actions:\n" + space.describe() + "\n")
    first = client.reset(Level(seed=seed) if level is None else level)
    label = f"generated level (seed {seed})" if level is None else str(level)
    print(f"== {env.name}: {label} ==\n{_shown(first.observation)}\n")
    total, steps, done = 0.0, 0, False
    feed = iter(lines) if lines is not None else None
    while not done and steps < max_steps:
        text = _next_action(feed)
        if text is None or text in ("quit", "exit"):
            break
        if text in ("?", "help"):
            print(HELP + "\n" + space.describe())
            continue
        try:
            action = space.parse(text)
        except ValueError as e:
            print(f"  not an action: {e}. {HELP}")
            if feed is not None:
                return 2
            continue
        result = client.step(action)
        steps += 1
        total += result.reward
        done = result.terminated
        print(f"> {text}\n  reward {result.reward:+g} (total {total:g})"
              + (f"  events: {', '.join(result.events)}" if result.events else "")
              + (f"\n  result: {_shown(result.last_action_result)}" if result.last_action_result else ""))
        print(f"\n{_shown(result.observation)}\n")
    _summary(env, level, total, steps, done, max_steps)
    return 0


def _next_action(feed):
    if feed is not None:
        return next(feed, None)
    try:
        return input("action> ").strip()
    except EOFError:
        return None


def _summary(env, level, total, steps, done, max_steps) -> None:
    reason = "the episode ended" if done else ("the step limit was reached" if steps >= max_steps else "stopped early")
    print(f"== {reason} after {steps} step(s): total reward {total:g}")
    best = env.max_reward(level) if level else None
    if best:
        print(f"   normalized reward {total / best:.3f} (max reward {best:g} from {layout.LEVEL_MAX_REWARDS})")
    else:
        print(f"   normalized reward: unknown (no max reward for this level in {layout.LEVEL_MAX_REWARDS})")
