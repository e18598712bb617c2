"""Stage 2, dsl: design document -> DSL YAML (config.yaml), checked by the DSL checker.
The checker's located errors go back to the model for a bounded number of corrections."""
from __future__ import annotations

import re
from pathlib import Path

from envforge import dsl_schema  # its checker (and jsonschema) loaded on first use: review's listing needs neither
from envforge.dsl_schema.problems import errors
from envforge.pipeline import layout, paths, safe_io
from envforge.pipeline.errors import LocatedError, Rejected
from envforge.pipeline.generate.context import StageReport, ThemeContext
from envforge.pipeline.llm.ask import ask_until_valid
from envforge.pipeline.llm.messages import Message, Response
from envforge.pipeline.located import Problem
from envforge.pipeline.prompts import render

MAX_FEEDBACK_LINES = 40  # of the checker's problems sent back to the model per correction
_FENCE = re.compile(r"```(?:ya?ml)?[ \t]*\n(.*?)```", re.S)


def extract_yaml(text: str) -> str:
    """The YAML in a reply: the last fenced block if there is one, else the whole reply."""
    blocks = _FENCE.findall(text)
    return (blocks[-1] if blocks else text).strip() + "\n"


async def run(ctx: ThemeContext) -> StageReport:
    example = (paths.REFERENCE_ENVS_DIR / "crate_dock" / layout.CONFIG).read_text(encoding="utf-8")
    # Each request: the instructions, the design, and only the latest attempt with the checker's
    # feedback on it (at most MAX_FEEDBACK_LINES lines): earlier attempts are not re-sent, so no
    # request grows with the corrections.
    head = [Message.system(render("generate/dsl_system.j2", example=example), cache=True),
            Message.user(render("generate/dsl.j2", theme=ctx.theme.text, design=ctx.read(layout.DESIGN)))]
    found: list = []
    asked_before = 0

    async def ask(last: Response | None, feedback: str) -> Response:
        nonlocal asked_before
        turns = [] if last is None else [
            last.to_message(), Message.user(render("generate/dsl_fix.j2", feedback=feedback, earlier=asked_before - 1))]
        asked_before += 1
        return await ctx.llm.complete("dsl", head + turns, max_tokens=6000)

    async def check(document: str) -> str:
        problems = dsl_schema.check_text(document, layout.CONFIG)
        found[:] = errors(problems)
        if not found:
            return ""
        lines = dsl_schema.feedback_for_model(problems).splitlines()
        more = len(lines) - MAX_FEEDBACK_LINES
        return "\n".join(lines[:MAX_FEEDBACK_LINES] + ([f"({more} more problem(s) not shown)"] if more > 0 else []))

    asked = await ask_until_valid(ask, extract_yaml, check, ctx.options.dsl_corrections + 1, "")
    asked.raise_budget()
    if asked.value is not None:
        ctx.write(layout.CONFIG, asked.value)  # also when rejected: kept for review
    if asked.accepted:
        return StageReport(asked.exit_status, asked.attempts)
    raise Rejected(f"config.yaml still has {len(found)} error(s) after "
                   f"{ctx.options.dsl_corrections} correction(s); first: {found[0]}",
                   details={"problems": [str(p) for p in found], "exit_status": asked.exit_status})


def config_errors(folder: Path) -> list[Problem]:
    """The errors `envforge dsl check` finds in the folder's config.yaml, which is read bounded and
    never through a link (a missing or unreadable file is one error): the DSL gate, applied when
    the DSL stage ends, after a person's edit, before a retry and when a theme is packaged."""
    try:
        text = safe_io.read_text(folder, layout.CONFIG)
    except LocatedError as e:
        return [e.problem]
    return errors(dsl_schema.check_text(text, layout.CONFIG))


def check_edited(ctx: ThemeContext) -> str | None:
    """After a pause, a person may have edited config.yaml: what is wrong with it now (the person's
    to fix, not a verdict on the model's work), or None."""
    problems = config_errors(ctx.work)
    if problems:
        return (f"{ctx.work / layout.CONFIG}: expected a valid DSL document after your edit, found "
                f"{len(problems)} error(s); first: {problems[0]}")
    return None
