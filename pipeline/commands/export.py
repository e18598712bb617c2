"""envforge export FORMAT ENV_DIR… --out DIR: environments in another tool's shape.

    verifiers   installable verifiers modules (pipeline.api.export; the module needs envforge-rl[verifiers])
    harbor      Harbor task folders, one per level (pipeline.api.harbor; their images install envforge-rl)

Neither writer needs the other tool installed.
"""
from __future__ import annotations

from envforge.pipeline import quoting
from envforge.pipeline.api.harbor import HarborOptions
from envforge.pipeline.api.values import out_dir
from envforge.pipeline.commands._flags import arg, command, env_dirs, flag_type
from envforge.pipeline.errors import UserError

DESCRIPTION = """Write environments in another tool's shape. verifiers: each environment as an installable
verifiers 0.4 environment package (DIR/envforge_NAME/, pyproject.toml naming envforge-rl[verifiers]): pip install
it with envforge (the printed command names the wheel or checkout envforge was installed from), then vf-eval
envforge_NAME -m MODEL --client.base-url URL. harbor: one Harbor task per level (DIR/NAME-level_01/:
task.toml, instruction.md, environment/Dockerfile playing the level in envforge's sandbox, tests/test.sh
writing the normalized reward, solution/solve.sh playing the level's certified witness): harbor run -p DIR."""


@command("export", HarborOptions, description=DESCRIPTION,
         help="write environments in another tool's shape (verifiers modules, Harbor tasks)",
         arguments=[arg("format", choices=["verifiers", "harbor"], help="the tool's shape (verifiers, harbor)"),
                    env_dirs(nargs="+"),
                    arg("--out", required=True, metavar="DIR", type=flag_type(out_dir),
                        help="where the module or task folders are written")])
def run(args, options: HarborOptions) -> int:
    if args.format == "harbor":
        from envforge.pipeline.api.harbor import export_harbor

        tasks = export_harbor(args.env_dirs, args.out, options)
        print(f"envforge export: {len(tasks)} Harbor task(s) in {args.out} "
              f"(harbor run -p {quoting.shell(args.out)} -a oracle)")
        return 0
    given = [name for name, value in options.flat().items() if value != HarborOptions.default(name)]
    if given:
        raise UserError(f"envforge export verifiers: expected no harbor options, found "
                        f"{', '.join('--' + name.replace('_', '-') for name in given)}")
    from envforge.pipeline.api.export import export_verifiers, install_command

    for project in export_verifiers(args.env_dirs, args.out):
        print(f"envforge export: {project} ({install_command(project)}; vf-eval {project.name} -m MODEL "
              "--client.base-url URL)")
    return 0
