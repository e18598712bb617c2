"""The coding agent: a tool-using loop that writes and repairs an environment's files.

It works inside one theme's work folder only. Its tools list, read, write and edit files
(exact string replacement), run `envforge check` — in the sandbox — and finish. Every model
reply and tool result is appended to the theme's trajectory file as it happens. The agent
never runs the code it writes; only the sandbox does, through the check.

The model is untrusted input, so everything it can make the loop do is bounded:
- at most MAX_TOOL_CALLS_PER_REPLY tool calls of one reply run; the others are dropped, and the
  model is told so;
- a stage's step budget (`max_steps`) counts every tool call run (a write, a read, a check, ...)
  and every reply that runs none, so a stage makes at most `max_steps` model calls and runs at
  most `max_steps` tools;
- read_file returns at most READ_CHARS characters per call (`offset` reads on), and every tool
  result at most MAX_RESULT_CHARS;
- what is sent to the model is bounded: the system prompt and the task, then the newest turns
  whole up to RECENT_CHARS characters; older tool outputs, long tool arguments and long reply
  texts are replaced by a note saying what was elided (`bounded_history`);
- a written file is at most MAX_FILE_BYTES, and the folder stays within the sandbox's folder
  limits (names, depth, files, bytes: `pipeline.sandbox.outside.folder.write_problem`);
- config.yaml is fixed by the DSL stage: the agent cannot change it (a change goes back through
  the DSL stage and its check: `envforge review retry NAME --from dsl`);
- any failure of a tool on the model's arguments (a 300-character name, a NUL) is a tool error the
  model reads, never an error of envforge.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from envforge.pipeline import layout, safe_io
from envforge.pipeline import records as files
from envforge.pipeline.check import CheckReport, check_env
from envforge.pipeline.errors import InfrastructureError
from envforge.pipeline.generate.journal import JournaledClient
from envforge.pipeline.kinds import CheckFound, CodingReply, CodingToolResult
from envforge.pipeline.llm.messages import Message, ToolCall, ToolSpec
from envforge.pipeline.records import DiskFull
from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside.executor import infrastructure_errors
from envforge.pipeline.sandbox.outside.folder import name_problem, shown, write_problem

MAX_FILE_BYTES = 200_000  # one file written
MAX_TOOL_CALLS_PER_REPLY = 16
READ_CHARS = 32_000  # one read_file call returns at most this many characters
MAX_RESULT_CHARS = READ_CHARS + 1_000  # any tool result
RECENT_CHARS = 150_000  # the newest turns sent whole; older ones are elided
MAX_REPLY_TOKENS = 16_000
_KEEP_TEXT = 500  # of an elided reply's text
_KEEP_ARGUMENT = 200  # an elided tool call's argument longer than this is replaced by a note
WRITABLE_SUFFIXES = (".py", ".txt", ".yaml", ".json", ".md")
# envforge's records and what earlier stages fixed: the model may not write them
PROTECTED = {*layout.RECORD_KINDS, layout.DESIGN, layout.CONFIG}
UNREADABLE = {layout.CALL_JOURNAL, layout.TRAJECTORY}  # envforge's logs of this very conversation
_FOLDER = SandboxLimits()  # the sandbox's folder limits (folder_mb, folder_files), as check's copy applies them

_path = {"path": {"type": "string", "description": "file name inside the environment folder, e.g. env_main.py"}}
TOOLS = (
    ToolSpec("list_files", "List the files of the environment folder.", {"type": "object", "properties": {}}),
    ToolSpec(
        "read_file",
        f"Read a file of the environment folder: at most {READ_CHARS} characters per call, from `offset` (default 0).",
        {"type": "object", "properties": {**_path, "offset": {"type": "integer", "minimum": 0}}, "required": ["path"]},
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a file with the given content.",
        {"type": "object", "properties": {**_path, "content": {"type": "string"}}, "required": ["path", "content"]},
    ),
    ToolSpec(
        "edit_file",
        "Replace exactly one occurrence of `old` with `new` in a file.",
        {
            "type": "object",
            "properties": {**_path, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"],
        },
    ),
    ToolSpec(
        "run_check",
        "Run `envforge check` on the folder (in the sandbox) and get its problems.",
        {"type": "object", "properties": {}},
    ),
    ToolSpec(
        "finish",
        "Stop: the files are complete (say what you did).",
        {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
    ),
)


FINISHED = "finished"  # the model called finish


def out_of_steps(max_steps: int) -> str:
    return f"out_of_steps_after_{max_steps}"


@dataclass
class AgentOutcome:
    exit_status: str  # FINISHED, or out_of_steps_after_N: the step budget ran out first
    steps: int  # steps used: tool calls run, and replies that ran none
    last_check: CheckReport | None
    model_calls: int = 0

    @property
    def finished(self) -> bool:
        return self.exit_status == FINISHED


class ToolError(Exception):
    pass


class Workspace:
    def __init__(self, root: Path):
        self.root = root
        self.last_check: CheckReport | None = None

    def resolve(self, name: object, writing: bool = False) -> PurePosixPath:
        """The model's file name as a path relative to the folder; a name the folder rules refuse,
        a path leaving the folder, or (`writing`) a file the agent may not write is a ToolError."""
        if not isinstance(name, str) or not name.strip():
            raise ToolError("expected `path`, a file name inside the environment folder")
        rel = PurePosixPath(name.strip())
        if rel.is_absolute() or ".." in rel.parts or (rel.parts and rel.parts[0].startswith(".")):
            raise ToolError(f"expected a relative path inside the environment folder, found {shown(name)!r}")
        if writing and rel.as_posix() == layout.CONFIG:
            raise ToolError(f"{layout.CONFIG} is fixed: the DSL stage wrote it and its check passed; make the "
                            f"files fit it. If it cannot be right, say so in finish: a change goes back through "
                            f"the DSL stage and its check")
        if writing and (rel.suffix not in WRITABLE_SUFFIXES or rel.name in PROTECTED or len(rel.parts) > 2):
            raise ToolError(f"cannot write {shown(name)!r}: expected a .py/.txt/.yaml/.json/.md file of the "
                            f"environment, at most one folder deep (not {', '.join(sorted(PROTECTED))})")
        if rel.name in UNREADABLE:
            raise ToolError(f"{rel.name} is envforge's log of this work, not a file of the environment")
        problem = next((p for p in map(name_problem, rel.parts) if p), "")
        if problem:
            raise ToolError(f"cannot use {shown(name)!r}: {problem}")
        return rel

    def list_files(self) -> str:
        names = [shown(str(p.relative_to(self.root))) for p in sorted(self.root.rglob("*"))
                 if p.is_file() and "__pycache__" not in p.parts and layout.GENERATED_LEVELS not in p.parts
                 and p.name not in UNREADABLE]
        return "\n".join(names) or "(empty)"

    def _text(self, rel: PurePosixPath) -> str:
        if not safe_io.is_file(self.root, rel):
            raise ToolError(f"no file {shown(str(rel))!r}; the folder has:\n{self.list_files()}")
        return safe_io.read_text(self.root, rel, label=str(rel))

    def read_file(self, path, offset=0) -> str:
        rel = self.resolve(path)
        if offset is None:
            offset = 0
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ToolError(f"expected `offset`, a character position of 0 or more, found {shown(repr(offset))}")
        text = self._text(rel)
        part = text[offset:offset + READ_CHARS]
        if offset == 0 and len(text) <= READ_CHARS:
            return text
        end = offset + len(part)
        more = f"; call read_file with offset={end} for the rest" if end < len(text) else ""
        return part + f"\n[characters {offset}-{end} of {len(text)} shown{more}]"

    def write_file(self, path, content) -> str:
        rel = self.resolve(path, writing=True)
        if not isinstance(content, str):
            raise ToolError("expected `content`, the whole text of the file")
        data = content.encode("utf-8", "surrogateescape")
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"file too large: {len(data)} bytes, at most {MAX_FILE_BYTES}")
        problem = write_problem(str(self.root), rel.parts, len(data), _FOLDER.folder_mb, _FOLDER.folder_files)
        if problem:
            raise ToolError(f"cannot write {rel}: {problem}")
        files.write_bytes(self.root / Path(*rel.parts), data)
        return f"wrote {rel} ({content.count(chr(10)) + 1} lines)"

    def edit_file(self, path, old, new) -> str:
        rel = self.resolve(path, writing=True)
        text = self._text(rel)
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolError("expected `old` (non-empty, exact text in the file) and `new`")
        count = text.count(old)
        if count != 1:
            raise ToolError(f"expected `old` to occur exactly once in {rel}, found it {count} times")
        return self.write_file(str(rel), text.replace(old, new, 1)).replace("wrote", "edited")

    async def run_check(self) -> str:
        self.last_check = await asyncio.to_thread(check_env, self.root)
        return format_check(self.last_check)


def _found(report: CheckReport | None) -> CheckFound | None:
    """What the check found, counted, for the log (review reads it)."""
    if report is None:
        return None
    errors = [p for p in report.problems if p.severity == "error"]
    return CheckFound(len(errors), len(report.problems) - len(errors), str(errors[0])[:500] if errors else "")


def format_check(report: CheckReport, most: int = 40) -> str:
    """The check as the model reads it: located problems (the first `most` errors and 10 warnings,
    with how many more), no timings (so reruns are identical)."""
    errors = [p for p in report.problems if p.severity == "error"]
    warnings = [p for p in report.problems if p.severity != "error"]
    lines = ([f"check passed ({len(warnings)} warning(s))."] if not errors
             else [f"check failed: {len(errors)} error(s), {len(warnings)} warning(s)."])
    lines += [f"error: {p}" for p in errors[:most]] + [f"warning: {p}" for p in warnings[:10]]
    if len(errors) > most:
        lines.append(f"({len(errors) - most} more error(s) not shown)")
    return "\n".join(lines)


async def run_agent(llm: JournaledClient, stage: str, system: str, task: str, workspace: Workspace,
                    max_steps: int, trajectory: Path) -> AgentOutcome:
    messages = [Message.system(system, cache=True), Message.user(task)]
    steps = calls = 0
    while steps < max_steps:
        reply = await llm.complete(stage, bounded_history(messages), tools=TOOLS, max_tokens=MAX_REPLY_TOKENS)
        calls += 1
        room = min(MAX_TOOL_CALLS_PER_REPLY, max_steps - steps)
        run, dropped = reply.tool_calls[:room], len(reply.tool_calls) - min(room, len(reply.tool_calls))
        files.append(trajectory, CodingReply(stage, calls, [{"name": c.name, "arguments": c.arguments} for c in run],
                                             reply.text, dropped or None))
        messages.append(replace(reply.to_message(), tool_calls=tuple(run)))
        if not reply.tool_calls:
            steps += 1
            messages.append(Message.user("Use the tools to write and check the files; call finish when done."))
            continue
        finished = False
        for call in run:
            steps += 1
            result, failed = await _execute(workspace, call)
            result = _cut(result, MAX_RESULT_CHARS)
            finished = finished or (call.name == "finish" and not failed)
            found = _found(workspace.last_check) if call.name == "run_check" and not failed else None
            files.append(trajectory, CodingToolResult(stage, calls, shown(str(call.name), 60), failed, result[:4000],
                                                      found))
            messages.append(Message.tool_result(call, result, is_error=failed))
        if dropped:
            messages.append(Message.user(_dropped_note(len(reply.tool_calls), len(run), max_steps, steps)))
        if finished:
            return AgentOutcome(FINISHED, steps, workspace.last_check, calls)
    return AgentOutcome(out_of_steps(max_steps), steps, workspace.last_check, calls)


def _dropped_note(asked: int, ran: int, max_steps: int, steps: int) -> str:
    why = (f"at most {MAX_TOOL_CALLS_PER_REPLY} run per reply" if ran == MAX_TOOL_CALLS_PER_REPLY
           else f"the stage's budget of {max_steps} steps (one per tool call) is spent")
    return (f"Your reply asked for {asked} tool calls: {why}, so the first {ran} ran and the other "
            f"{asked - ran} did not. Steps used: {steps} of {max_steps}.")


async def _execute(workspace: Workspace, call: ToolCall) -> tuple[str, bool]:
    if call.problem:  # the reply reader could not read the arguments (too deep, say): no tool runs
        return f"error: {shown(str(call.name), 60)}: {call.problem}", True
    args = call.arguments if isinstance(call.arguments, dict) else {}
    try:
        if call.name == "run_check":  # envforge's own machinery: its faults are no tool error
            return await workspace.run_check(), False
        if call.name == "list_files":
            return workspace.list_files(), False
        if call.name == "read_file":
            return workspace.read_file(args.get("path"), args.get("offset")), False
        if call.name == "write_file":
            return workspace.write_file(args.get("path"), args.get("content")), False
        if call.name == "edit_file":
            return workspace.edit_file(args.get("path"), args.get("old"), args.get("new")), False
        if call.name == "finish":
            return "finished", False
        raise ToolError(f"unknown tool {shown(str(call.name), 60)!r}; the tools are "
                        f"{', '.join(t.name for t in TOOLS)}")
    except ToolError as e:
        return f"error: {e}", True
    except (DiskFull, InfrastructureError, *infrastructure_errors()):
        raise  # the machine's fault, not the model's: the stage stops as an error, not a verdict
    except Exception as e:  # anything else a tool meets on the model's arguments is the model's to read
        if call.name == "run_check":
            raise
        return f"error: {call.name} failed: {shown(str(e) or type(e).__name__, 300)}", True


# -- the conversation sent to the model ---------------------------------------------------------

def bounded_history(messages: list[Message], recent: int = RECENT_CHARS) -> list[Message]:
    """What is sent: the system prompt and the task whole, then the newest turns whole while they
    fit in `recent` characters; every older turn is elided — a tool output becomes a note naming
    the call and its size, a tool call's long arguments and a reply's long text are cut, each
    saying what was dropped (like the history processors of SWE-agent and mini-swe-agent, which
    keep the last observations). The result is a fresh list; `messages` is kept whole."""
    head, turns = messages[:2], messages[2:]
    calls = {c.id: c for m in turns for c in m.tool_calls}
    kept: list[Message] = []
    left, eliding = recent, False
    for m in reversed(turns):
        size = _size(m)
        if not eliding and size <= left:
            left -= size
            kept.append(m)
            continue
        eliding = True
        kept.append(_elided(m, calls))
    return head + kept[::-1]


def _size(m: Message) -> int:
    return len(m.content) + sum(len(c.name) + sum(len(str(v)) for v in _values(c)) for c in m.tool_calls)


def _values(call: ToolCall) -> list:
    return list(call.arguments.values()) if isinstance(call.arguments, dict) else [call.arguments]


def _elided(m: Message, calls: dict[str, ToolCall]) -> Message:
    if m.role == "tool" and len(m.content) > _KEEP_ARGUMENT:
        call = calls.get(m.tool_call_id)
        what = _describe(call) if call else "a tool call"
        return replace(m, content=f"[elided to keep the conversation short: the output of {what}, "
                                  f"{len(m.content)} characters; call it again if you need it]")
    if m.role == "assistant":
        text = m.content
        if len(text) > _KEEP_TEXT:
            text = text[:_KEEP_TEXT] + f"\n[... {len(text) - _KEEP_TEXT} more characters of this reply elided]"
        return replace(m, content=text, tool_calls=tuple(_elided_call(c) for c in m.tool_calls))
    return m


def _elided_call(call: ToolCall) -> ToolCall:
    if not isinstance(call.arguments, dict):
        return replace(call, arguments={})
    arguments = {k: (v if len(str(v)) <= _KEEP_ARGUMENT else f"[elided: {len(str(v))} characters]")
                 for k, v in call.arguments.items()}
    return replace(call, arguments=arguments)


def _describe(call: ToolCall) -> str:
    path = call.arguments.get("path") if isinstance(call.arguments, dict) else None
    name = shown(str(call.name), 40)
    return f"{name}({shown(path, 80)})" if isinstance(path, str) else name


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut: a tool result is at most {limit}]"

