"""The coding agent: a tool-using loop that writes and repairs an environment's files.

It works inside one theme's work folder only. Its tools list, read, write and edit files
(exact string replacement), run `envforge check` — in the sandbox — and finish. Every model
reply and tool result is appended to the theme's trajectory file as it happens. The agent
never runs the code it writes; only the sandbox does, through the check.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipeline import records as files
from pipeline import layout
from pipeline.check import CheckReport, check_env
from pipeline.generate.journal import JournaledClient
from pipeline.llm.messages import Message, ToolCall, ToolSpec

MAX_FILE_BYTES = 200_000
WRITABLE_SUFFIXES = (".py", ".txt", ".yaml", ".json", ".md")
PROTECTED = {*layout.RECORD_KINDS, layout.DESIGN}  # envforge's records: the model may not write them

_path = {"path": {"type": "string", "description": "file name inside the environment folder, e.g. env_main.py"}}
TOOLS = (
    ToolSpec("list_files", "List the files of the environment folder.", {"type": "object", "properties": {}}),
    ToolSpec("read_file", "Read a file of the environment folder.",
             {"type": "object", "properties": _path, "required": ["path"]}),
    ToolSpec("write_file", "Create or overwrite a file with the given content.",
             {"type": "object", "properties": {**_path, "content": {"type": "string"}}, "required": ["path", "content"]}),
    ToolSpec("edit_file", "Replace exactly one occurrence of `old` with `new` in a file.",
             {"type": "object", "properties": {**_path, "old": {"type": "string"}, "new": {"type": "string"}},
              "required": ["path", "old", "new"]}),
    ToolSpec("run_check", "Run `envforge check` on the folder (in the sandbox) and get its problems.",
             {"type": "object", "properties": {}}),
    ToolSpec("finish", "Stop: the files are complete (say what you did).",
             {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}),
)


FINISHED = "finished"  # the model called finish


def out_of_steps(max_steps: int) -> str:
    return f"out_of_steps_after_{max_steps}"


@dataclass
class AgentOutcome:
    exit_status: str  # FINISHED, or out_of_steps_after_N: the step limit came first
    steps: int  # model calls made
    last_check: CheckReport | None

    @property
    def finished(self) -> bool:
        return self.exit_status == FINISHED


class ToolError(Exception):
    pass


class Workspace:
    def __init__(self, root: Path):
        self.root = root
        self.last_check: CheckReport | None = None

    def resolve(self, name: object, writing: bool = False) -> Path:
        if not isinstance(name, str) or not name.strip():
            raise ToolError("expected `path`, a file name inside the environment folder")
        rel = PurePosixPath(name.strip())
        if rel.is_absolute() or ".." in rel.parts or (rel.parts and rel.parts[0].startswith(".")):
            raise ToolError(f"expected a relative path inside the environment folder, found {name!r}")
        if writing and (rel.suffix not in WRITABLE_SUFFIXES or rel.name in PROTECTED or len(rel.parts) > 2):
            raise ToolError(f"cannot write {name!r}: expected a .py/.txt/.yaml/.json file of the environment "
                            f"(not {', '.join(sorted(PROTECTED))})")
        return self.root / Path(*rel.parts)

    def list_files(self) -> str:
        names = [str(p.relative_to(self.root)) for p in sorted(self.root.rglob("*"))
                 if p.is_file() and "__pycache__" not in p.parts and layout.GENERATED_LEVELS not in p.parts
                 and p.name not in (layout.CALL_JOURNAL, layout.TRAJECTORY)]
        return "\n".join(names) or "(empty)"

    def read_file(self, path) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"no file {path!r}; the folder has:\n{self.list_files()}")
        return target.read_text(encoding="utf-8", errors="replace")

    def write_file(self, path, content) -> str:
        target = self.resolve(path, writing=True)
        if not isinstance(content, str):
            raise ToolError("expected `content`, the whole text of the file")
        if len(content.encode()) > MAX_FILE_BYTES:
            raise ToolError(f"file too large: {len(content.encode())} bytes, at most {MAX_FILE_BYTES}")
        files.write_text(target, content)
        return f"wrote {path} ({content.count(chr(10)) + 1} lines)"

    def edit_file(self, path, old, new) -> str:
        text = self.read_file(path)
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolError("expected `old` (non-empty, exact text in the file) and `new`")
        count = text.count(old)
        if count != 1:
            raise ToolError(f"expected `old` to occur exactly once in {path}, found it {count} times")
        return self.write_file(path, text.replace(old, new, 1)).replace("wrote", "edited")

    async def run_check(self) -> str:
        self.last_check = await asyncio.to_thread(check_env, self.root)
        return format_check(self.last_check)


def format_check(report: CheckReport) -> str:
    """The check as the model reads it: located problems, no timings (so reruns are identical)."""
    errors = [p for p in report.problems if p.severity == "error"]
    warnings = [p for p in report.problems if p.severity != "error"]
    lines = ([f"check passed ({len(warnings)} warning(s))."] if not errors
             else [f"check failed: {len(errors)} error(s), {len(warnings)} warning(s)."])
    lines += [f"error: {p}" for p in errors] + [f"warning: {p}" for p in warnings[:10]]
    return "\n".join(lines)


async def run_agent(llm: JournaledClient, stage: str, system: str, task: str, workspace: Workspace,
                    max_steps: int, trajectory: Path) -> AgentOutcome:
    messages = [Message.system(system, cache=True), Message.user(task)]
    for step in range(1, max_steps + 1):
        reply = await llm.complete(stage, messages, tools=TOOLS, max_tokens=16000)
        _log(trajectory, {"stage": stage, "step": step, "text": reply.text,
                          "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls]})
        messages.append(reply.to_message())
        if not reply.tool_calls:
            messages.append(Message.user("Use the tools to write and check the files; call finish when done."))
            continue
        finished = False
        for call in reply.tool_calls:
            result, failed = await _execute(workspace, call)
            finished = finished or (call.name == "finish" and not failed)
            _log(trajectory, {"stage": stage, "step": step, "tool": call.name, "error": failed, "result": result[:4000]})
            messages.append(Message.tool_result(call, result, is_error=failed))
        if finished:
            return AgentOutcome(FINISHED, step, workspace.last_check)
    return AgentOutcome(out_of_steps(max_steps), max_steps, workspace.last_check)


async def _execute(workspace: Workspace, call: ToolCall) -> tuple[str, bool]:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    try:
        if call.name == "list_files":
            return workspace.list_files(), False
        if call.name == "read_file":
            return workspace.read_file(args.get("path")), False
        if call.name == "write_file":
            return workspace.write_file(args.get("path"), args.get("content")), False
        if call.name == "edit_file":
            return workspace.edit_file(args.get("path"), args.get("old"), args.get("new")), False
        if call.name == "run_check":
            return await workspace.run_check(), False
        if call.name == "finish":
            return "finished", False
        raise ToolError(f"unknown tool {call.name!r}; the tools are {', '.join(t.name for t in TOOLS)}")
    except ToolError as e:
        return f"error: {e}", True


def _log(trajectory: Path, entry: dict) -> None:
    files.append_jsonl(trajectory, "coding_step", entry)
