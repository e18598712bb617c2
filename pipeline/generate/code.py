"""Stage 3, code: the coding agent writes the environment's files from the DSL, using the
runtime's layers and observation policies, with a reference environment as the example."""
from __future__ import annotations

from envforge.pipeline import layout, paths
from envforge.pipeline.errors import Rejected
from envforge.pipeline.generate.agent import MAX_TOOL_CALLS_PER_REPLY, Workspace, run_agent
from envforge.pipeline.generate.context import StageReport, ThemeContext
from envforge.pipeline.prompts import render

EXAMPLE_ENV = "crate_dock"
EXAMPLE_FILES = (layout.CONFIG,) + layout.AGENT_FILES


def system_prompt() -> str:
    """The long stable prefix (runtime contract + example): the same for every theme, so cached."""
    example_dir = paths.REFERENCE_ENVS_DIR / EXAMPLE_ENV
    example = {name: (example_dir / name).read_text(encoding="utf-8") for name in EXAMPLE_FILES}
    return render("generate/code_system.j2", example_name=EXAMPLE_ENV, example=example,
                  files=layout.AGENT_FILES)


async def run(ctx: ThemeContext) -> StageReport:
    task = render("generate/code_task.j2", theme=ctx.theme.text, design=ctx.read(layout.DESIGN),
                  config=ctx.read(layout.CONFIG), files=layout.AGENT_FILES, steps=ctx.options.code_steps,
                  per_reply=MAX_TOOL_CALLS_PER_REPLY)
    outcome = await run_agent(ctx.llm, "code", system_prompt(), task, Workspace(ctx.work),
                              ctx.options.code_steps, ctx.work / layout.TRAJECTORY)
    missing = [name for name in layout.AGENT_FILES if not (ctx.work / name).is_file()]
    if missing:
        raise Rejected(f"expected the coding agent to write {', '.join(missing)}, found them missing "
                       f"after {outcome.steps} step(s)" + ("" if outcome.finished else " (it never called finish)"),
                       details={"exit_status": outcome.exit_status, "steps": outcome.steps})
    return StageReport(outcome.exit_status, outcome.steps)
