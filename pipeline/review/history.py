"""The coding agent's history of one theme, read back from its trajectory.jsonl.

The trajectory holds, in order, every model reply (pipeline.kinds.CodingReply) and every tool
result (CodingToolResult) of the code and repair stages. A stage that
ran again (a retry) starts again at step 1, which is where one attempt ends and the next begins.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from envforge.pipeline import records as files
from envforge.pipeline.kinds import CheckFound, CodingStep, CodingToolResult


@dataclass
class ToolUse:
    name: str
    arguments: dict
    result: str = ""
    error: bool = False
    check: CheckFound | None = None  # a run_check's findings, counted (None in a log written before)

    @property
    def verdict(self) -> str:
        """What a run_check found: from its counts, or in a log written before them, from the first
        line of the check output (pipeline.generate.agent.format_check's, which no model or
        environment text reaches)."""
        return self.check.verdict if self.check else check_verdict(self.result)

    def summary(self) -> str:
        """One line saying what the call did: the file it changed, or what the check found."""
        args = self.arguments
        if self.name == "write_file":
            text = args.get("content") if isinstance(args.get("content"), str) else ""
            what = f"wrote {_clip(args.get('path'), 80)} ({text.count(chr(10)) + 1} lines)"
        elif self.name == "edit_file":
            what = f"edited {_clip(args.get('path'), 80)}: {_clip(args.get('old'))!r} -> {_clip(args.get('new'))!r}"
        elif self.name == "run_check":
            what = "ran check: " + self.verdict
        elif self.name == "finish":
            what = f"finished: {_clip(args.get('summary'), 120)!r}"
        elif self.name in ("read_file", "list_files"):
            what = f"{self.name.replace('_', ' ')} {_clip(args.get('path'), 80)}".rstrip()
        else:
            what = _clip(self.name, 60)
        return what + (f"  [failed: {_clip(self.result, 160)}]" if self.error else "")


@dataclass
class HistoryStep:
    number: int
    text: str
    tools: list[ToolUse] = field(default_factory=list)


@dataclass
class AgentAttempt:
    stage: str  # code | repair
    number: int  # 1 for the first time the stage ran, 2 after a retry, ...
    steps: list[HistoryStep] = field(default_factory=list)

    @property
    def changed(self) -> list[str]:
        """The files the agent wrote or edited, in the order it first touched them."""
        seen: list[str] = []
        for step in self.steps:
            for tool in step.tools:
                path = tool.arguments.get("path")
                if tool.name in ("write_file", "edit_file") and not tool.error and path not in seen:
                    seen.append(path)
        return seen

    @property
    def checks(self) -> list[str]:
        """What each check the agent ran found."""
        return [t.verdict for s in self.steps for t in s.tools if t.name == "run_check"]


def agent_attempts(trajectory: Path) -> list[AgentAttempt]:
    attempts: list[AgentAttempt] = []
    current: dict[str, AgentAttempt] = {}
    for entry in _entries(trajectory):
        stage = entry.stage
        if isinstance(entry, CodingToolResult):  # it belongs to the last call of that name in the step
            step = current[stage].steps[-1] if stage in current and current[stage].steps else None
            pending = [t for t in (step.tools if step else []) if t.name == entry.tool and not t.result]
            if pending:
                pending[0].result, pending[0].error, pending[0].check = entry.result, entry.error, entry.check
            continue
        if stage not in current or entry.step == 1:
            current[stage] = AgentAttempt(stage, sum(a.stage == stage for a in attempts) + 1)
            attempts.append(current[stage])
        tools = [ToolUse(str(c.get("name")), c.get("arguments") if isinstance(c.get("arguments"), dict) else {})
                 for c in entry.tool_calls]
        current[stage].steps.append(HistoryStep(entry.step, entry.text or "", tools))
    return attempts


def check_verdict(result: str) -> str:
    """"passed" or "failed: N error(s); first: ..." from the check output the agent read (a log
    written before run_check results carried their counts)."""
    lines = result.strip().splitlines()
    if not lines:
        return "(no output)"
    if lines[0].startswith("check passed"):
        return "passed"
    first = next((ln.removeprefix("error: ") for ln in lines[1:] if ln.startswith("error: ")), "")
    return lines[0].removeprefix("check ").rstrip(".") + (f"; first: {first}" if first else "")


def _entries(trajectory: Path) -> Iterator[CodingStep]:
    """The log's lines as the model (a line cut by a kill, or one that does not fit, is left out:
    the report shows what it can)."""
    for _, entry in files.lines(trajectory, CodingStep, unfit="skip"):
        yield entry


def _clip(value, width: int = 60) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"
