"""Stage 1, design: theme -> design document (goal, rules, state, actions, rewards,
observation, termination, difficulty knobs, tags)."""
from __future__ import annotations

from envforge.pipeline import layout
from envforge.pipeline.errors import Rejected
from envforge.pipeline.generate.context import StageReport, ThemeContext
from envforge.pipeline.llm.messages import Message
from envforge.pipeline.prompts import render

MIN_DESIGN_CHARS = 200


async def run(ctx: ThemeContext) -> StageReport:
    messages = [Message.system(render("generate/design_system.j2")),
                Message.user(render("generate/design.j2", theme=ctx.theme.text, tags=ctx.theme.tags,
                                    notes=ctx.theme.notes))]
    reply = await ctx.llm.complete("design", messages, max_tokens=4000)
    text = reply.text.strip()
    if len(text) < MIN_DESIGN_CHARS:
        raise Rejected(f"expected a design document of at least {MIN_DESIGN_CHARS} characters, "
                       f"found {len(text)}: {text[:120]!r}")
    ctx.write(layout.DESIGN, text + "\n")
    return StageReport(figures={"characters": len(text)})
