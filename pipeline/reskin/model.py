"""A skin in any named style ("noir", "pirate radio", "terse"), written by the model.

The model sees the agent instruction and a few semantic observations with the env's own rendering,
and replies with skins/<name>.py. The dynamics-identity check decides; its reason (a load error,
an exception with file and line, the first state that differed, identical renderings) goes back to
the model for another attempt, up to `attempts` in all.
"""
from __future__ import annotations

import dataclasses
import json
import re

from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.llm import LLMClient, Message, Response
from envforge.pipeline.llm.ask import ask_until_valid
from envforge.pipeline.prompts import render
from envforge.pipeline.reskin import Reskinned, install
from envforge.pipeline.sandbox import SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


async def reskin_with_model(spec: EnvSpec, client: LLMClient, style: str, name: str, attempts: int = 3,
                            examples: int = 3, limits: SandboxLimits | None = None, **check) -> Reskinned:
    messages = [
        Message.system(render("skins/write_system.j2")),
        Message.user(
            render(
                "skins/write_task.j2",
                style=style,
                env_name=spec.name,
                instruction=_instruction(spec),
                examples=rendering_examples(spec, examples, limits),
            )
        ),
    ]
    header = f'# Skin "{name}" in the style {style!r}, written by {client.spec} (envforge reskin).\n'
    installed: list[Reskinned] = []

    async def ask(last: Response | None, problem: str) -> Response:
        if last is not None:
            messages.extend([Message.assistant(last.text),
                             Message.user(render("skins/write_feedback.j2", reason=problem))])
        return await client.complete(messages, theme=spec.name, stage=f"reskin:{name}", max_tokens=4096)

    async def identity(source: str) -> str:
        installed[:] = [install(spec, name, f"model: {style}", header + source, **check)]
        return "" if installed[0].report.ok else installed[0].report.reason

    asked = await ask_until_valid(ask, extract_code, identity, attempts,
                                  "expected the skin file in one ```python block, found no code block")
    asked.raise_budget()
    if not installed:
        raise ValueError(f"the model replied {attempts} time(s) without a ```python block")
    return dataclasses.replace(installed[0], exit_status=asked.exit_status)


def extract_code(text: str) -> str | None:
    """The longest fenced code block of a reply (the file), or None."""
    blocks = _CODE.findall(text or "")
    return max(blocks, key=len).strip() + "\n" if blocks else None


def rendering_examples(spec: EnvSpec, count: int, limits: SandboxLimits | None = None) -> list[dict]:
    """The resets of the first `count` levels: omega (as JSON) and the env's own rendering."""
    out = []
    with EnvClient.open(spec, limits) as env:
        for level in spec.all_levels()[:count]:
            first = env.reset(level, want_state=True)
            out.append({"omega": json.dumps(first.raw_obs, sort_keys=True), "observation": first.observation})
    return out


def _instruction(spec: EnvSpec) -> str:
    return spec.instruction or "(no agent_instruction.txt)"  # read once by EnvSpec, never through a link
