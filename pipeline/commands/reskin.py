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

from pipeline import layout
from pipeline.errors import Rejected, UserError
from pipeline.llm.cli_args import add_llm_arguments, run_with_client
from pipeline.reskin import TEMPLATE_STYLES, recheck, reskin_template
from pipeline.reskin.identity import IdentityReport
from pipeline.verify.context import Context, Options
from pipeline.argtypes import COUNT, SEED


DESCRIPTION = """A skin is skins/<name>.py defining render(omega, env) -> str. json, narrative and
inverse (AutoEnv E.3 semantic inversion) are written from templates; any other style by the model.
Base and skinned env then play the planner's witness and random action sequences side by side on
every level: states, rewards, done flags and events must be equal, renderings must differ. Exit 0
when the skin passes, 1 when it fails."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "reskin", description=DESCRIPTION,
        help="write a new skin (rendering) for an environment and check its dynamics are unchanged")
    p.add_argument("env_dir", metavar="ENV_DIR", help="environment folder")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--style", metavar="STYLE",
                       help=f"{', '.join(TEMPLATE_STYLES)} (templates, no model) or any other style name "
                            "(written by the model)")
    which.add_argument("--check", metavar="NAME", help="check the existing skins/NAME.py again")
    p.add_argument("--name", help="skin name (default: the style)")
    p.add_argument("--hint", action="store_true",
                   help="inverse: start every observation with E.3's warning that semantics may be inverted")
    p.add_argument("--sequences", type=COUNT, default=2, metavar="N",
                   help="random action sequences per level in the identity check, besides the planner's (default 2)")
    p.add_argument("--attempts", type=COUNT, default=3, metavar="N",
                   help="model-written skins: attempts, each after the check's feedback (default 3)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the random sequences (default 0)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_llm_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        ctx = Context.open(args.env_dir, Options())
    except Rejected as e:
        raise UserError(e.reason) from None
    check = {"random_sequences": args.sequences, "seed": args.seed}
    if args.check:
        if args.check not in ctx.env.skins():
            raise UserError(f"--check {args.check}: expected skins/{args.check}.py in {ctx.env.path}, found "
                            f"{', '.join(ctx.env.skins()) or 'no skins'}")
        result = recheck(ctx, args.check, **check)
        return _print(args, args.check, result.style, result.report, result.file)
    name = args.name or args.style
    if not layout.SKIN_NAME.fullmatch(name) or name.startswith("_"):
        raise UserError(f"--name: expected letters, digits, '-' or '_' (not first), found {name!r}; "
                        "pass --name for a style with spaces")
    if args.style in TEMPLATE_STYLES:
        try:
            result = reskin_template(ctx, args.style, name, hint=args.hint, **check)
        except ValueError as e:
            raise UserError(f"--style {args.style}: {e}") from None
        return _print(args, name, args.style, result.report, result.file)

    from pipeline.reskin.model import reskin_with_model

    async def work(client) -> int:
        result = await reskin_with_model(ctx, client, args.style, name, attempts=args.attempts, **check)
        return _print(args, name, args.style, result.report, result.file)

    return run_with_client(args, work)


def _print(args, name: str, style: str, report: IdentityReport, file) -> int:
    if args.json:
        print(json.dumps({"name": name, "style": style, "file": str(file) if file else None, **report.to_dict()},
                         indent=2))
    elif report.ok:
        print(f"skin {name} ({style}) -> {file or f'skins/{name}.py'}: {report.summary()}")
    else:
        print(f"skin {name} ({style}) REJECTED{f' (moved to {file})' if file else ''}: {report.reason}")
    return 0 if report.ok else 1
