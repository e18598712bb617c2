"""`envforge dsl check` as a user runs it: printed problems and exit status."""
import json

import pytest
from cli_kit import ROOT, envforge

from envforge.pipeline import cli

B4 = ROOT / "dsl_schema" / "examples" / "connect_four_b4.yaml"


def test_dsl_command_is_registered():
    assert "envforge.pipeline.commands.dsl" in cli.COMMAND_MODULES


def test_b4_example_passes_with_warnings_only(tmp_path):
    result = envforge("dsl", "check", str(B4), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{B4}: skin.template: expected placeholders" in result.stdout
    assert "[warning]" in result.stdout and "[error]" not in result.stdout
    assert result.stdout.strip().endswith("1 file checked: 0 error(s), 2 warning(s)")


def test_invalid_document_exits_1_and_prints_located_errors(tmp_path):
    bad = tmp_path / "config.yaml"
    bad.write_text(B4.read_text().replace('value_key: "timeout_rewards"', 'value_key: "draw_rewards"')
                   .replace("max_steps: 40\n  conditions", "max_steps: 30\n  conditions"))
    result = envforge("dsl", "check", "config.yaml", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("config.yaml: reward.events[2].value_key: expected the name of a value map")
               and line.endswith("[error]") for line in lines)
    assert "config.yaml: termination.max_steps: expected 40 (the value of state_template.globals.max_steps, " \
           "which it mirrors), found 30 [error]" in lines


def test_every_file_is_checked_and_a_missing_file_is_an_error(tmp_path):
    result = envforge("dsl", "check", str(B4), "missing.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "missing.yaml: (file): expected an existing DSL file, found no such file [error]" in result.stdout
    assert f"{B4}: skin.template" in result.stdout
    assert "2 files checked: 1 error(s), 2 warning(s)" in result.stdout


def test_json_output_lists_problems_and_a_summary(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("meta: {id: x, name: [oops\n")
    result = envforge("dsl", "check", "--json", str(B4), "broken.yaml", cwd=tmp_path)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["summary"] == {"files": 2, "files_with_errors": 1, "errors": 1, "warnings": 2}
    [error] = [p for p in report["problems"] if p["severity"] == "error"]
    assert error["file"] == "broken.yaml" and error["expected"] == "valid YAML" and error["line"] == 2
    assert set(error) == {"file", "path", "expected", "found", "severity", "line", "check"}


@pytest.mark.parametrize("text", ["", "[1, 2]\n", "just a string\n"])
def test_non_documents_exit_1(tmp_path, text):
    (tmp_path / "c.yaml").write_text(text)
    result = envforge("dsl", "check", "c.yaml", cwd=tmp_path)
    assert result.returncode == 1 and "c.yaml: (document): expected a mapping" in result.stdout
