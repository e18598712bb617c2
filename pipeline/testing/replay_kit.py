"""Write replay recordings for tests: a scripted model playing each generation stage.

The recordings use the documented replay format (docs/replay_format.md), so what the tests
exercise is exactly what a person authoring a demo writes.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from envforge.pipeline.testing import tiny_env

DESIGN = """## Goal
Walk along a corridor to the goal tile.
## Rules
move(direction) steps left or right; unknown actions do nothing and say why.
## State
pos (int), goal (int), length (int).
## Actions
move(direction: left|right)
## Rewards
1.0 on reaching the goal (binary).
## Observation
The whole corridor as text (full).
## Termination
At the goal, or after 12 steps.
## Levels and difficulty knobs
Length 6-10 from the seed; the goal lies inside, away from the start; max reward 1.
## Tags
reward: binary, observation: full, semantics: aligned
"""


def write_call(root: Path, theme: str, stage: str, index: int, text: str = "", tool_calls=()) -> None:
    path = root / theme.replace("_", "-") / stage / f"{index:03d}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    response = {"text": text, "usage": {"input_tokens": 1000, "output_tokens": 200}}
    if tool_calls:
        response["tool_calls"] = [{"name": n, "arguments": a} for n, a in tool_calls]
    path.write_text(yaml.safe_dump({"response": response}, sort_keys=False))


def corridor_files(replace: dict | None = None) -> dict[str, str]:
    """The corridor env's agent-written files, optionally broken (same form as tiny_env.write_env)."""
    import textwrap

    files = {"env_main.py": tiny_env.ENV_MAIN, "env_generate.py": tiny_env.ENV_GENERATE,
             "env_validator.py": tiny_env.ENV_VALIDATOR,
             "env_obs.py": "from pipeline.runtime import FullObservation\n\nPOLICY = FullObservation\n",
             "agent_instruction.txt": "Walk to the goal G with move(direction=left|right) within 12 steps.\n",
             "action_space.txt": '[{"name": "move", "parameters": {"direction": "left|right"}}]\n'}
    for name, change in (replace or {}).items():
        files[name] = files[name].replace(*change) if isinstance(change, tuple) else change
    return {k: textwrap.dedent(v).lstrip() for k, v in files.items()}


def record_corridor(root: Path, theme: str, replace: dict | None = None, fix: dict | None = None,
                    give_up: bool = False) -> None:
    """design (1 call), dsl (1), code (write all, run_check, finish); when the files are broken,
    the repair stage reads the check and applies `fix` (or gives up)."""
    write_call(root, theme, "design", 1, DESIGN)
    write_call(root, theme, "dsl", 1, "```yaml\n" + yaml.safe_dump(tiny_env.CONFIG, sort_keys=False) + "```\n")
    files = corridor_files(replace)
    write_call(
        root,
        theme,
        "code",
        1,
        "Writing the files.",
        [("write_file", {"path": n, "content": t}) for n, t in files.items()],
    )
    write_call(root, theme, "code", 2, "", [("run_check", {})])
    write_call(root, theme, "code", 3, "", [("finish", {"summary": "files written"})])
    if replace:
        if give_up:
            write_call(root, theme, "repair", 1, "", [("run_check", {})])
            write_call(root, theme, "repair", 2, "I cannot find the bug.", [("finish", {"summary": "gave up"})])
        else:
            edits = [("edit_file", {"path": n, "old": new, "new": old}) for n, (old, new) in (fix or replace).items()]
            write_call(root, theme, "repair", 1, "Fixing.", edits + [("run_check", {})])
            write_call(root, theme, "repair", 2, "", [("finish", {"summary": "fixed"})])
