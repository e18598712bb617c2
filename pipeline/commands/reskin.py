"""envforge reskin ENV_DIR --style json|narrative|inverse|NAME [--name N] [--hint] [--json]
envforge reskin ENV_DIR --check NAME

Writes skins/<name>.py (a new rendering over the same dynamics), checks that base and skinned env
play identically on every level while their renderings differ, and lists the skin in
manifest.json. json, narrative and inverse come from templates; any other style is written by the
model (the LLM flags apply). Exit 0 when the skin passes, 1 when it fails (it is then moved to
skins/_rejected/ and not listed).
"""
from __future__ import annotations

import json

from envforge.pipeline.api.reskin import ReskinJob, ReskinOptions
from envforge.pipeline.commands._flags import command, env_dir
from envforge.pipeline.commands._run import run_with_client
from envforge.pipeline.reskin import Reskinned

DESCRIPTION = """A skin is skins/<name>.py defining render(omega, env) -> str. json, narrative and
inverse (AutoEnv E.3 semantic inversion) are written from templates; any other style by the model.
Base and skinned env then play the planner's witness and random action sequences side by side on
every level: states, rewards, done flags and events must be equal, renderings must differ. Exit 0
when the skin passes, 1 when it fails."""


@command("reskin", ReskinOptions, description=DESCRIPTION, without=["executor"],
         help="write a new skin (rendering) for an environment and check its dynamics are unchanged",
         arguments=[env_dir()], json="print the result as JSON")
def run(args, options: ReskinOptions) -> int:
    job = ReskinJob(args.env_dir, options)
    if not job.needs_model:
        return _print(args.json, job.run())

    async def work(client) -> int:
        return _print(args.json, await job.run_with_model(client))

    return run_with_client(job.options.llm, "reskin", work, json=args.json)


def _print(as_json: bool, result: Reskinned) -> int:
    name, style, report, file = result.name, result.style, result.report, result.file
    if as_json:
        print(json.dumps({"name": name, "style": style, "file": str(file) if file else None, **report.to_dict()},
                         indent=2))
    elif report.ok:
        print(f"skin {name} ({style}) -> {file or f'skins/{name}.py'}: {report.summary()}")
    else:
        print(f"skin {name} ({style}) REJECTED{f' (moved to {file})' if file else ''}: {report.reason}")
    return 0 if report.ok else 1
