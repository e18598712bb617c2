"""Which files a person changed after the model wrote them, as unified diffs.

The model's version of each file is rebuilt from the theme's own records: design.md and
config.yaml from the call journal (the last design reply; the YAML of the last DSL reply),
the agent's files by replaying its successful write_file and edit_file calls from the
trajectory. A file that differs from that version was edited by hand (or by a retry's stage
that has not finished yet).
"""
from __future__ import annotations

import difflib
from pathlib import Path

from envforge.pipeline import layout, safe_io
from envforge.pipeline.generate.dsl import extract_yaml
from envforge.pipeline.review.catalog import model_calls
from envforge.pipeline.review.history import AgentAttempt


def model_versions(folder: Path, agent: list[AgentAttempt]) -> dict[str, str]:
    versions: dict[str, str] = {}
    replies: dict[str, str] = {}
    for entry in model_calls(folder):
        replies[entry.stage] = str(entry.response.get("text") or "")
    if "design" in replies:
        versions[layout.DESIGN] = replies["design"].strip() + "\n"
    if "dsl" in replies:
        versions[layout.CONFIG] = extract_yaml(replies["dsl"])
    for attempt in agent:
        for step in attempt.steps:
            for tool in step.tools:
                path, args = tool.arguments.get("path"), tool.arguments
                if tool.error or not isinstance(path, str):
                    continue
                if tool.name == "write_file" and isinstance(args.get("content"), str):
                    versions[path] = args["content"]
                elif tool.name == "edit_file" and path in versions and isinstance(args.get("old"), str):
                    versions[path] = versions[path].replace(args["old"], str(args.get("new", "")), 1)
    return versions


def hand_edits(folder: Path, agent: list[AgentAttempt]) -> dict[str, str]:
    """File name -> unified diff (model's version -> now) for every file changed since."""
    diffs = {}
    for name, before in model_versions(folder, agent).items():
        now = safe_io.read_shown(folder, name)
        if now is None:
            continue
        if now != before:
            diffs[name] = "".join(difflib.unified_diff(before.splitlines(True), now.splitlines(True),
                                                       f"{name} (as the model wrote it)", f"{name} (now)"))
    return diffs
