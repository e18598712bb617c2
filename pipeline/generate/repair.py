"""Stage 4, repair: run `envforge check` in the sandbox; while it finds problems, the coding
agent reads them, edits the files and checks again, within `repair_steps` steps (tool calls)."""
from __future__ import annotations

from envforge.pipeline import layout
from envforge.pipeline.check import check_env
from envforge.pipeline.errors import Rejected
from envforge.pipeline.generate.agent import MAX_TOOL_CALLS_PER_REPLY, Workspace, format_check, run_agent
from envforge.pipeline.generate.code import system_prompt
from envforge.pipeline.generate.context import StageReport, ThemeContext
from envforge.pipeline.prompts import render


async def run(ctx: ThemeContext) -> StageReport:
    report = await ctx.sandboxed(check_env, ctx.work)
    if report.ok:
        return StageReport("already_passing", 0)
    ctx.go_on()
    task = render("generate/repair_task.j2", theme=ctx.theme.text, check=format_check(report),
                  files=Workspace(ctx.work).list_files(), steps=ctx.options.repair_steps,
                  per_reply=MAX_TOOL_CALLS_PER_REPLY)
    outcome = await run_agent(ctx.llm, "repair", system_prompt(), task, Workspace(ctx.work),
                              ctx.options.repair_steps, ctx.work / layout.TRAJECTORY)
    # The pipeline's own verdict, whatever the agent believed.
    report = await ctx.sandboxed(check_env, ctx.work)
    if not report.ok:
        errors = [str(p) for p in report.problems if p.severity == "error"]
        raise Rejected(f"check still fails after {outcome.steps} repair step(s): {errors[0]}",
                       details={"problems": errors, "exit_status": outcome.exit_status, "steps": outcome.steps})
    return StageReport(outcome.exit_status, outcome.steps)
