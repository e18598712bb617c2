"""From flags, environment and .env to a configured provider, or a message saying how."""
import argparse

import pytest

from envforge.pipeline.api.options import LLMOptions
from envforge.pipeline.commands._flags import add_options
from envforge.pipeline.errors import UserError
from envforge.pipeline.llm import resolve


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_options(parser, LLMOptions)
    return parser.parse_args(argv)


def client_from_args(args):
    return LLMOptions.from_args(args).client()


def test_without_any_provider_a_command_stops_and_says_how_to_configure_one(llm_env):
    with pytest.raises(UserError) as error:
        client_from_args(parse("--budget-usd", "1"))
    message = str(error.value)
    for hint in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "--provider replay [--replay DIR]",
        "examples/replay",
        ".env",
    ):
        assert hint in message


def test_the_provider_follows_the_key_that_is_set(llm_env, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert resolve().spec == "anthropic/claude-sonnet-4-5"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert resolve().spec == "openai/gpt-5-mini"


def test_a_dot_env_file_supplies_keys_but_the_environment_wins(llm_env, monkeypatch):
    (llm_env / ".env").write_text("# keys\nexport ANTHROPIC_API_KEY=\"from-file\"\nOPENAI_API_KEY=from-file\n")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert resolve(model="anthropic/claude-haiku-4-5").api_key == "from-file"
    assert resolve(model="openai/gpt-4o").api_key == "from-env"


def test_a_malformed_dot_env_line_is_reported_with_its_line_number(llm_env):
    (llm_env / ".env").write_text("OK=1\nthis is not an assignment\n")
    with pytest.raises(UserError, match=r"\.env:2: expected KEY=VALUE"):
        resolve(model="openai/gpt-4o")


def test_an_openai_compatible_server_needs_only_a_base_url_and_a_model(llm_env):
    config = client_from_args(parse("--model", "openai/llama3.1:8b", "--base-url", "http://127.0.0.1:11434/v1")).config
    assert (config.provider, config.model, config.base_url) == ("openai", "llama3.1:8b", "http://127.0.0.1:11434/v1")
    with pytest.raises(UserError, match="name the model served at http://h/v1"):
        resolve(provider="openai", base_url="http://h/v1")


def test_with_an_explicit_provider_a_slashed_model_name_is_kept_whole(llm_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert resolve(provider="openai", model="anthropic/claude-3.5-sonnet").model == "anthropic/claude-3.5-sonnet"
    assert resolve(provider="openai", model="openai/gpt-4o").model == "gpt-4o"


def test_api_key_env_names_another_variable(llm_env, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-key")
    config = resolve(model="openai/meta-llama/llama-3-70b", base_url="https://openrouter.ai/api/v1",
                     api_key_env="OPENROUTER_API_KEY")
    assert config.api_key == "or-key" and config.model == "meta-llama/llama-3-70b"
    with pytest.raises(UserError, match="needs an API key in the environment variable OPENAI_API_KEY"):
        resolve(model="openai/gpt-4o")


def test_replay_needs_an_existing_folder_and_never_uses_the_cache(llm_env):
    from envforge.pipeline.llm.config import BUNDLED_REPLAY_DIR

    assert resolve(provider="replay").replay_dir == BUNDLED_REPLAY_DIR  # the bundled demos
    with pytest.raises(UserError, match="found no such folder"):
        resolve(provider="replay", replay_dir=str(llm_env / "nowhere"))
    assert resolve(replay_dir=str(llm_env)).cache_path is None


def test_flag_values_are_checked(llm_env, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    with pytest.raises(SystemExit) as exited:  # at parse time, before anything runs
        parse("--budget-usd", "-1")
    assert exited.value.code == 2
    assert "argument --budget-usd: expected a number >= 0, found '-1'" in capsys.readouterr().err
    with pytest.raises(UserError, match="--budget-usd: expected a finite, non-negative"):  # the Python API path
        resolve(model="openai/gpt-4o", run_budget_usd=-1)
    with pytest.raises(UserError, match="--prices missing.yaml: no such file"):
        client_from_args(parse("--prices", "missing.yaml"))
    with pytest.raises(UserError, match="same folder"):
        client_from_args(parse("--replay", str(llm_env), "--record", str(llm_env)))


def test_a_command_that_hits_its_budget_ends_with_a_clear_outcome_and_the_cost_summary(
        llm_server, make_llm_client, llm_env, monkeypatch, capsys):
    from envforge.pipeline.commands._run import EXIT_BUDGET_EXCEEDED, run_with_client
    from envforge.pipeline.llm import Message
    from envforge.pipeline.testing.llm_server import Reply

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    llm_server.rule = lambda n: Reply(input_tokens=10, output_tokens=60)  # $0.000625 with gpt-4o
    args = parse("--model", "openai/gpt-4o", "--base-url", llm_server.openai_url, "--budget-usd", "0.002")

    async def generate(client):
        for theme in ("maze", "ferry", "orchard", "bakery"):
            await client.complete([Message.user("design " + theme)], theme=theme, stage="design", max_tokens=100)
        return 0

    assert run_with_client(LLMOptions.from_args(args), "generate", generate) == EXIT_BUDGET_EXCEEDED
    out, err = capsys.readouterr()
    assert err.startswith("envforge generate: budget exceeded: the run cap is $0.0020")
    assert "cost summary:" in out and "0.001250" in out
    assert llm_server.count() == 2
