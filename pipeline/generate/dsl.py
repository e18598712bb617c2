"""Stage 2, dsl: design document -> DSL YAML (config.yaml), checked by the DSL checker.
The checker's located errors go back to the model for a bounded number of corrections."""
from __future__ import annotations

import re

from dsl_schema.check import check_text, feedback_for_model
from dsl_schema.problems import errors
from pipeline import layout, paths
from pipeline.generate.context import Rejected, ThemeContext
from pipeline.llm.messages import Message
from pipeline.prompts import render

_FENCE = re.compile(r"```(?:ya?ml)?[ \t]*\n(.*?)```", re.S)


def extract_yaml(text: str) -> str:
    """The YAML in a reply: the last fenced block if there is one, else the whole reply."""
    blocks = _FENCE.findall(text)
    return (blocks[-1] if blocks else text).strip() + "\n"


async def run(ctx: ThemeContext) -> None:
    example = (paths.REFERENCE_ENVS_DIR / "crate_dock" / layout.CONFIG).read_text(encoding="utf-8")
    messages = [Message.system(render("generate/dsl_system.j2", example=example), cache=True),
                Message.user(render("generate/dsl.j2", theme=ctx.theme.text, design=ctx.read(layout.DESIGN)))]
    for attempt in range(ctx.options.dsl_corrections + 1):
        reply = await ctx.llm.complete("dsl", messages, max_tokens=6000)
        document = extract_yaml(reply.text)
        problems = check_text(document, layout.CONFIG)
        if not errors(problems):
            ctx.write(layout.CONFIG, document)
            return
        messages += [reply.to_message(), Message.user(render("generate/dsl_fix.j2", feedback=feedback_for_model(problems)))]
    ctx.write(layout.CONFIG, document)  # kept for review
    first = errors(problems)[0]
    raise Rejected("dsl", f"config.yaml still has {len(errors(problems))} error(s) after "
                          f"{ctx.options.dsl_corrections} correction(s); first: {first}",
                   {"problems": [str(p) for p in errors(problems)]})


def check_edited(ctx: ThemeContext) -> None:
    """After a pause, a person may have edited config.yaml: it must still be valid."""
    problems = errors(check_text(ctx.read(layout.CONFIG), layout.CONFIG))
    if problems:
        raise Rejected("dsl", f"config.yaml (edited) has {len(problems)} error(s); first: {problems[0]}",
                       {"problems": [str(p) for p in problems]})
