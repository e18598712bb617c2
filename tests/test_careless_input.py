"""Careless input as a new user types it (issue 16, cases 5-7): one clear line, the right exit
code, nothing written, never a traceback."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest
from cli_kit import ENVFORGE, ROOT, envforge

CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"
THEMES = ROOT / "examples" / "themes.txt"


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["evaluate", str(CRATE_DOCK), "--max-steps", "-5"],
            "argument --max-steps: expected a whole number >= 1, found '-5'",
        ),
        (
            ["evaluate", str(CRATE_DOCK), "--planner-nodes", "0"],
            "argument --planner-nodes: expected a whole number >= 1, found '0'",
        ),
        (
            ["evaluate", str(CRATE_DOCK), "--budget-usd", "-1"],
            "argument --budget-usd: expected a number >= 0, found '-1'",
        ),
        (
            ["evaluate", str(CRATE_DOCK), "--runs", "three"],
            "argument --runs: expected a whole number >= 1, found 'three'",
        ),
        (
            ["evaluate", str(CRATE_DOCK), "--call-seconds", "nan"],
            "argument --call-seconds: expected a number > 0, found 'nan'",
        ),
        (
            ["verify", str(CRATE_DOCK), "--margin", "-1"],
            "argument --margin: expected a number >= 0 and <= 1, found '-1'",
        ),
        (
            ["verify", str(CRATE_DOCK), "--random-episodes", "0"],
            "argument --random-episodes: expected a whole number >= 1, found '0'",
        ),
        (
            ["probe", str(CRATE_DOCK), "--choices", "9"],
            "argument --choices: expected a whole number >= 4 and <= 6, found '9'",
        ),
        (
            ["generate", "--themes", str(THEMES), "--concurrency", "0"],
            "argument --concurrency: expected a whole number >= 1, found '0'",
        ),
    ],
)
def test_a_flag_out_of_range_is_refused_before_anything_runs(tmp_path, argv, message):
    done = envforge(*argv, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_evaluate_out_naming_a_file_is_refused(tmp_path):
    (tmp_path / "results").write_text("mine\n")
    done = envforge("evaluate", str(CRATE_DOCK), "--agent", "random", "--out", "results", cwd=tmp_path)
    assert done.returncode == 2
    assert "argument --out: expected a folder to write into, found a file: 'results'" in done.stderr
    assert (tmp_path / "results").read_text() == "mine\n"


def test_probe_out_naming_a_folder_is_refused_and_leaves_nothing(tmp_path):
    (tmp_path / "items").mkdir()
    done = envforge("probe", str(CRATE_DOCK), "--n", "2", "--out", "items", cwd=tmp_path)
    assert done.returncode == 2
    assert "argument --out: expected a file to write, found a folder: 'items'" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items"]  # no items.tmp


def test_probe_on_an_env_that_does_not_load_names_the_file_and_line(tmp_path):
    env = tmp_path / "broken"
    shutil.copytree(CRATE_DOCK, env)
    with (env / "env_main.py").open("a") as f:
        f.write("\ndef (\n")
    done = envforge("probe", str(env), "--n", "2", "--out", "items.jsonl", cwd=tmp_path)
    assert done.returncode == 1
    assert "SyntaxError" in done.stderr and "env_main.py" in done.stderr
    assert not (tmp_path / "items.jsonl").exists()


def test_a_binary_price_table_is_a_one_line_error_and_no_run_folder(tmp_path):
    (tmp_path / "prices.yaml").write_bytes(b"models:\n  \xd0\xff\xfe: {}\n")
    done = envforge("generate", "--themes", str(THEMES), "--provider", "replay", "--prices", "prices.yaml",
                    "--out", "run", cwd=tmp_path)
    assert done.returncode == 2
    assert "price table prices.yaml: expected UTF-8 YAML text, found byte 0xd0 at offset 10" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_price_that_is_not_a_finite_number_is_refused(tmp_path):
    (tmp_path / "prices.yaml").write_text("models:\n  m: {input: .nan, output: 1}\n")
    done = envforge("generate", "--themes", str(THEMES), "--provider", "replay", "--prices", "prices.yaml",
                    "--out", "run", cwd=tmp_path)
    assert done.returncode == 2
    assert "price table prices.yaml: models.m: expected {input: N, output: N" in done.stderr


def test_doctor_names_an_unknown_provider_instead_of_saying_none_is_configured(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["ENVFORGE_DOTENV"] = str(tmp_path / ".env")
    done = envforge("doctor", "--model", "foo/bar", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert (
        "--model foo/bar: expected anthropic/<model>, openai/<model>, replay/<model>, found provider 'foo'"
        in done.stderr
    )
    assert "no model provider is configured" not in done.stderr


@pytest.mark.slow
def test_doctor_gives_up_on_an_unreachable_host_at_its_time_limit(tmp_path):
    with socket.socket() as s:  # a loopback port nobody listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(__import__("os").environ, OPENAI_API_KEY="k", ENVFORGE_DOTENV=str(tmp_path / ".env"))
    done = envforge("doctor", "--model", "openai/gpt-4o", "--base-url", f"http://127.0.0.1:{port}/v1",
                    "--timeout", "1", cwd=tmp_path, env=env)
    assert done.returncode == 1
    # The mechanism: the per-call retry time limit (2 x --timeout, at least 10 s), not the attempt count.
    assert "the limit for one call being 10 s" in done.stderr + done.stdout


@pytest.mark.slow  # the whole demo: the session's one run of it (conftest.py)
def test_cost_rows_keep_whole_theme_names_and_replayed_tokens(generate_demo):
    done = generate_demo
    themes = [line.strip() for line in THEMES.read_text().splitlines() if line.strip() and not line.startswith("#")]
    rows = [line for line in done.stdout.splitlines() if line.startswith("  theme ")]
    assert len(rows) == len(themes)
    assert len({row.split()[1] for row in rows}) == len(themes)  # no two rows cut to the same label
    total = next(line for line in done.stdout.splitlines() if line.startswith("  total"))
    calls, cached, retries, tokens_in, tokens_out = (int(x) for x in total.split()[1:6])
    assert calls > 0 and tokens_in > 0 and tokens_out > 0  # the recordings carry usage; replay reports it


def test_verify_on_a_folder_that_is_no_environment_is_a_usage_error_and_writes_nothing(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not an env\n")
    done = envforge("verify", "notes", cwd=tmp_path)
    assert done.returncode == 2
    assert "notes: expected an environment folder (env_main.py, config.yaml), found neither file" in done.stderr
    assert "REJECTED" not in done.stdout
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["readme.txt"]
    missing = envforge("verify", "missing", cwd=tmp_path)
    assert missing.returncode == 2 and "missing: expected an environment folder, found no such folder" in missing.stderr


def test_a_copy_of_an_env_under_another_name_scores_the_same_random_episodes(tmp_path):
    shutil.copytree(CRATE_DOCK, tmp_path / "my_copy")
    for name, env in (("original", CRATE_DOCK), ("copy", tmp_path / "my_copy")):
        done = envforge("evaluate", str(env), "--agent", "random", "--runs", "1", "--max-levels", "2",
                        "--out", name, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    import json

    def scores(out):
        rows = [json.loads(line) for line in (tmp_path / out / "episodes.jsonl").read_text().splitlines()]
        return sorted((r["level"], r["steps"], r["total_reward"], r["stop_reason"]) for r in rows)

    assert scores("copy") == scores("original")


# -- careless inputs nobody had tried (issue 16, "Done when": careless inputs it has not seen) --

def test_a_themes_file_with_a_byte_order_mark_and_crlf_lines_names_and_replays_its_themes(tmp_path):
    """An editor on Windows saves UTF-8 with a BOM and CRLF: the first theme is the same theme
    (same folder name, found in the recordings), not a new one with an invisible character."""
    (tmp_path / "themes.txt").write_bytes(b"\xef\xbb\xbf" + THEMES.read_bytes().replace(b"\n", b"\r\n"))
    done = envforge("generate", "--themes", "themes.txt", "--provider", "replay", "--out", "run",
                    "--pause-after", "design", "--json", cwd=tmp_path)
    import json

    summary = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert summary["errors"] == {}
    assert "a_lighthouse_keeper_must_keep_three_962115" in summary["paused"] and len(summary["paused"]) == 3


def test_play_with_stdin_closed_ends_the_episode_instead_of_blaming_the_environment(tmp_path):
    done = subprocess.run(f"'{ENVFORGE}' play '{CRATE_DOCK}' <&-", shell=True, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped early after 0 step(s)" in done.stdout
    assert "environment failed" not in done.stdout + done.stderr


def test_a_config_indented_with_tabs_is_one_located_line(tmp_path):
    env = shutil.copytree(CRATE_DOCK, tmp_path / "tabbed")
    config = env / "config.yaml"
    config.write_text(config.read_text().replace("\n  tags:", "\n\ttags:", 1))
    done = envforge("evaluate", str(env), "--agent", "random", "--out", "ev", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("config.yaml:7: expected valid YAML, found a tab character (YAML indents "
                                        "with spaces only)")
    assert not (tmp_path / "ev").exists()


@pytest.mark.parametrize("out", ["crate_dock/evaluation", "crate_dock/", "crate_dock/."])
def test_evaluate_out_inside_the_environment_is_refused_and_writes_nothing(tmp_path, out):
    """Records written into the environment would change its content hash: every resume would
    play everything again, and the environment would carry another run's files."""
    env = shutil.copytree(CRATE_DOCK, tmp_path / "crate_dock")
    before = sorted(p.name for p in env.iterdir())
    done = envforge("evaluate", "crate_dock/", "--agent", "random", "--out", out, cwd=tmp_path)
    assert done.returncode == 2
    around = ", around it" if out == "crate_dock/evaluation" else ""
    assert done.stderr == (f"envforge evaluate: error: argument --out: expected a folder outside any environment "
                           f"folder, found '{env}', an environment folder{around} (what is written there would "
                           f"become part of the environment); choose another folder\n")
    assert sorted(p.name for p in env.iterdir()) == before


def test_an_unexpanded_tilde_in_out_means_the_home_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    done = envforge("evaluate", str(CRATE_DOCK), "--agent", "random", "--runs", "1", "--max-levels", "1",
                    "--out=~/ev", cwd=work, env={**os.environ, "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert (home / "ev" / "episodes.jsonl").is_file()
    assert not (work / "~").exists()


def test_a_huge_concurrency_is_capped_by_the_work_not_an_error(tmp_path):
    done = envforge("evaluate", str(CRATE_DOCK), "--agent", "random", "--runs", "1", "--max-levels", "2",
                    "--concurrency", "10000", "--out", "ev", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "ev" / "episodes.jsonl").read_text().splitlines()) == 2


# -- the themes file (issue 22 item 6, issue 23 item 6) --

def test_a_theme_given_twice_is_run_once_with_a_warning_and_not_counted_twice(tmp_path):
    """A repeated line used to be rejected at input, a rejection counted in every Table 2 column."""
    lines = THEMES.read_text().splitlines()
    first = next(ln for ln in lines if ln.strip() and not ln.startswith("#"))
    (tmp_path / "themes.txt").write_text("\n".join(lines + ["  " + first.upper().replace(" ", "  ")]) + "\n")
    done = envforge("generate", "--themes", "themes.txt", "--provider", "replay", "--out", "run",
                    "--pause-after", "design", "--json", cwd=tmp_path)
    import json

    summary = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    where = f"themes.txt:{lines.index(first) + 1}"
    assert f"envforge: warning: themes.txt:{len(lines) + 1}: the same theme as {where}; merged with it (run and " \
           f"counted once)" in done.stderr
    assert (summary["themes"], len(summary["paused"]), summary["rejected"], summary["errors"]) == (3, 3, {}, {})


def test_a_yaml_alias_bomb_in_a_themes_file_is_refused_without_using_the_memory(tmp_path):
    """616 bytes that expand to 9^9 strings: read with the bounded loader, under a 1 GB address
    space cap that the unbounded loader would need many times over."""
    (tmp_path / "bomb.yaml").write_text(_alias_bomb())
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))"
    done = subprocess.run([sys.executable, "-c", f"{limit}; import sys; from envforge.pipeline.cli import main; "
                           f"sys.exit(main(sys.argv[1:]))", "generate", "--themes", "bomb.yaml", "--provider",
                           "replay", "--out", "run"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    assert "bomb.yaml:" in done.stderr and "nodes once aliases are expanded, found more (an alias bomb?)" in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert not (tmp_path / "run").exists()


def _alias_bomb() -> str:
    """A YAML list whose first entry holds nine lists of nine aliases of the one before, nine deep."""
    levels = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"&{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "- [" + ", ".join(levels) + "]\n"
