"""envforge export verifiers ENV_DIR… --out DIR: environments as installable verifiers modules.

The writer is pipeline.api.export (it needs no verifiers to write; the module it writes
needs envforge-rl[verifiers] to run).
"""
from __future__ import annotations

from envforge.pipeline import quoting
from envforge.pipeline.commands._flags import arg, command, env_dirs

DESCRIPTION = """Write each environment as an installable verifiers environment module (DIR/envforge_NAME/,
pyproject.toml naming envforge-rl[verifiers]): pip install it, then vf-eval envforge_NAME -m MODEL -b
URL."""


@command("export", description=DESCRIPTION,
         help="write environments as installable modules of another tool (verifiers)",
         arguments=[arg("format", choices=["verifiers"], help="the tool's shape (verifiers)"),
                    env_dirs(nargs="+"),
                    arg("--out", required=True, metavar="DIR", help="where the module folders are written")])
def run(args) -> int:
    from envforge.pipeline.api.export import export_verifiers

    for project in export_verifiers(args.env_dirs, args.out):
        module = project.name
        print(f"envforge export: {project} (pip install {quoting.shell(project)}; vf-eval {module} -m MODEL -b URL)")
    return 0
