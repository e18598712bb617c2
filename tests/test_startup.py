"""What a command imports before it does anything (issue 37): beside jupyter every module costs
several times its own CPU (jsonschema pulls the format checkers jupyter installs), so `--version`
loads no command and no command loads the capabilities it does not run. Counted in a fresh process."""
from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from envforge.pipeline.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_version_imports_no_command_and_none_of_the_library():
    modules = imported_by("--version")
    ours = sorted(m for m in modules if m.startswith("envforge."))
    assert not [m for m in ours if m.startswith(("envforge.pipeline.commands", "envforge.pipeline.api",
                                                  "envforge.pipeline.generate", "envforge.pipeline.verify"))], ours
    assert not {"jsonschema", "asyncio", "jinja2", "anthropic", "openai"} & modules
    assert len(ours) <= 20, ours


def test_a_command_that_runs_no_model_and_reads_no_dsl_imports_neither():
    modules = imported_by("play", "--help")
    assert "envforge.pipeline.commands.play" in modules
    assert not {"jsonschema", "anthropic", "openai", "envforge.pipeline.generate.stages",
                "envforge.pipeline.commands.generate"} & modules
    # review lists and explains a run: the DSL's checker (jsonschema: 1.8 CPU-s beside jupyter) waits for a retry
    modules = imported_by("review", "--help")
    assert "envforge.pipeline.commands.review" in modules and "jsonschema" not in modules
