"""The library under the CLI (pipeline/api/): one options class per call, whose defaults are the
only defaults, shared by the command line and the Python API."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import envforge
from envforge.learning.settings import Settings
from envforge.pipeline import cli
from envforge.pipeline.api.check import CheckOptions
from envforge.pipeline.api.evaluate import EvaluateOptions
from envforge.pipeline.api.generate import GenerateOptions
from envforge.pipeline.api.learn import LearnOptions
from envforge.pipeline.api.play import PlayOptions
from envforge.pipeline.api.probe import ProbeOptions
from envforge.pipeline.api.reskin import ReskinOptions
from envforge.pipeline.api.verify import VerifyOptions
from envforge.pipeline.llm.config import LLMConfig

ROOT = Path(__file__).resolve().parent.parent
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
OPTIONS = {"evaluate": EvaluateOptions, "generate": GenerateOptions, "verify": VerifyOptions, "learn": LearnOptions,
           "probe": ProbeOptions, "reskin": ReskinOptions, "check": CheckOptions, "play": PlayOptions}


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield action


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_every_flag_of_an_option_has_the_options_default(command):
    options = OPTIONS[command]
    parser = cli.build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = {a.dest: a for a in _actions(sub) if a.dest in options.names()}
    assert flags, f"{command}: no flag sets an option of {options.__name__}"
    for name, action in flags.items():
        assert action.default == options.default(name), (command, name, action.default, options.default(name))
    # and what a command line without flags builds is the options' defaults
    positional = {"evaluate": [], "learn": [], "generate": []}.get(command, ["ENV"])
    extra = ["--style", "json"] if command == "reskin" else []
    args = parser.parse_args([command, *positional, *extra])
    assert options.from_args(args) == options.from_keywords(command, **({"style": "json"} if extra else {}))


def test_a_help_names_the_default_an_unset_option_stands_for():
    """An option left at None ("not given") takes another class's default later (learn's Settings, the
    provider's LLMConfig): `{default}` in its help is that default, declared there once."""
    parser = cli.build_parser(["learn"])
    learn = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["learn"]
    helps = {a.dest: a.help or "" for a in _actions(learn)}
    assert helps["iterations"].endswith(f"(default {Settings.iterations}, as in the paper)")
    assert helps["max_tokens"].endswith(f"(default {Settings.max_tokens})")
    assert helps["timeout"].endswith(f"(default {LLMConfig.timeout:g})")
    assert helps["max_concurrency"].endswith(f"(default {LLMConfig.max_concurrency})")
    assert not [dest for dest, text in helps.items() if "{default}" in text]


def test_an_unknown_keyword_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(envforge.UserError) as error:
        envforge.evaluate(CRATE_DOCK, agent="random", max_level=2, out=tmp_path / "o")
    message = str(error.value)
    assert message.startswith("envforge.evaluate: expected keyword options among agent, agent_name, ")
    assert "max_levels" in message and message.endswith("found max_level")
    assert not (tmp_path / "o").exists()
    with pytest.raises(envforge.UserError, match="envforge.generate: expected keyword options among .*found lvls"):
        envforge.generate(tmp_path / "themes.txt", tmp_path / "out", provider="replay", lvls=3)


def test_a_bad_value_is_refused_as_its_flag_would_be(tmp_path):
    with pytest.raises(envforge.UserError, match=r"envforge.evaluate: runs=0: expected a whole number >= 1, found 0"):
        envforge.evaluate(CRATE_DOCK, agent="random", runs=0, out=tmp_path / "o")
    with pytest.raises(envforge.UserError, match=r"split='train': expected one of test, val, found 'train'"):
        envforge.evaluate(CRATE_DOCK, agent="random", split="train", out=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_the_executor_is_an_option_of_the_call(tmp_path):
    """`executor` is checked by the call that takes it (the Python API used to drop it silently)."""
    with pytest.raises(envforge.UserError, match="^ray_address=1.2.3.4:1: expected executor ray with it"):
        envforge.evaluate(CRATE_DOCK, agent="random", ray_address="1.2.3.4:1", out=tmp_path / "o")
    with pytest.raises(envforge.UserError, match="executor='cloud': expected one of local, ray"):
        envforge.evaluate(CRATE_DOCK, agent="random", executor="cloud", out=tmp_path / "o")


@pytest.mark.slow  # measured: whole check/verify/probe/reskin runs
def test_check_and_verify_from_python_are_the_commands(tmp_path):
    import shutil

    env = tmp_path / "crate_dock"
    shutil.copytree(CRATE_DOCK, env)
    report = envforge.check(env, seed=1)
    assert report.ok and report.stats["levels"] == 15
    result = envforge.verify(env, stages="execution")
    assert result.accepted and result.stages.execution is not None and result.stages.levels is None
    assert result.stages.execution.levels == 15
    with pytest.raises(
        envforge.UserError, match="envforge.verify: expected keyword options among stages, .*found stage"
    ):
        envforge.verify(env, stage="execution")
    with pytest.raises(envforge.UserError, match="^stages: expected some of execution,levels,reliability"):
        envforge.verify(env, stages="speed")


@pytest.mark.slow  # measured: whole check/verify/probe/reskin runs
def test_probe_and_reskin_from_python_are_the_commands(tmp_path):
    import shutil

    env = tmp_path / "crate_dock"
    shutil.copytree(CRATE_DOCK, env)
    made = envforge.probe(env, kind="predict", n=2, out=tmp_path / "items.jsonl")
    assert made.out == tmp_path / "items.jsonl" and made.out.is_file()
    assert made.summary["predict"]["items"] == len(made.items) == len(made.out.read_text().splitlines()) > 0
    skin = envforge.reskin(env, style="json", sequences=1)
    assert skin.report.ok and skin.name == "json" and (env / "skins" / "json.py").is_file()
    with pytest.raises(envforge.UserError, match="expected one of style=STYLE or check=NAME"):
        envforge.reskin(env)
    with pytest.raises(
        envforge.UserError, match="envforge.probe: expected keyword options among kind, n, .*found items"
    ):
        envforge.probe(env, items=3)
