"""Issue 23's smaller items, each as a user meets it: a plot's title, a refused generate's cost
table, a file where a folder is expected, an --actions file's line number."""
from __future__ import annotations

import pytest

from envforge.pipeline.kinds import EpisodeRecord


def _record(env: str, run: int, normalized: float) -> EpisodeRecord:
    return EpisodeRecord.scored(env=env, level="levels/level_01.yaml", run=run, agent="random", model="-",
                                split="test", stop_reason="env_ended", total_reward=normalized, max_reward=1.0,
                                steps=3, env_steps=3, valid_actions=3, invalid_actions=0, format_errors=0,
                                action_validity_rate=1.0, invalid_action_rate=0.0, error_streaks=0,
                                recovered_streaks=0, recovery_rate=None, distinct_states=3, model_calls=0,
                                retries=0, tokens_in=0, tokens_out=0, dollars=0.0, wall_seconds=0.1)


def test_a_single_agents_per_env_plot_shows_its_whole_title(tmp_path, monkeypatch):
    """A single agent on one environment draws the narrowest figure; with a wider font than this
    machine's DejaVu Sans (here: a larger title size) its one-line title ran past both edges."""
    import matplotlib

    from envforge.pipeline.evaluate import report

    monkeypatch.setenv(report.PLOTS_VARIABLE, "on")
    monkeypatch.setitem(matplotlib.rcParams, "axes.titlesize", 20)
    drawn = {}

    def keep(path, figure, dpi=110):
        figure.canvas.draw()
        drawn[path.name] = [(t.get_text(), t.get_window_extent()) for t in figure.axes[0].texts + [figure.axes[0].title]
                            if t.get_text()], figure.bbox
        return path

    monkeypatch.setattr(report.files, "write_figure", keep)
    report.plot(tmp_path, report.summarize([_record("crate_dock", 0, 0.5), _record("crate_dock", 1, 0.7)]))
    texts, figure = drawn[report.PER_ENV_PNG]
    title = next((text, box) for text, box in texts if "Normalized reward per environment" in text.replace("\n", " "))
    assert figure.x0 <= title[1].x0 and title[1].x1 <= figure.x1, (title, figure)  # not cut at either side


def test_a_refused_generate_prints_its_one_error_line_and_no_cost_table(tmp_path, capsys, monkeypatch):
    from envforge.pipeline.cli import main

    monkeypatch.setenv("ENVFORGE_CACHE", str(tmp_path / "cache.sqlite"))
    (tmp_path / "themes.txt").write_text("A maze with no recording\n")
    argv = [
        "generate",
        "--themes",
        str(tmp_path / "themes.txt"),
        "--provider",
        "replay",
        "--out",
        str(tmp_path / "out"),
    ]
    assert main(argv) == 2  # the theme ended in an error (no recording); the run exists now
    capsys.readouterr()
    assert main(argv) == 2  # the same --out again, without --resume: refused
    out, err = capsys.readouterr()
    assert out == ""  # was: an empty cost summary table
    assert err.strip().splitlines() == [f"envforge generate: error: --out {tmp_path / 'out'}: it already holds a run "
                                        f"(envforge.sqlite); pass --resume to continue it, or choose another --out"]


@pytest.mark.parametrize("argv", [["check"], ["evaluate", "--agent", "random"], ["play"], ["probe"],
                                  ["reskin", "--style", "noir"], ["verify"], ["learn"]], ids=lambda a: a[0])
def test_a_file_where_a_folder_is_expected_is_called_a_file(argv, tmp_path, capsys):
    """Issue 23: a file given as ENV_DIR said "found no such folder"."""
    from envforge.pipeline.cli import main

    given = tmp_path / "notes.txt"
    given.write_text("not an environment\n")
    code = main([argv[0], str(given), *argv[1:]])
    out, err = capsys.readouterr()
    assert code in (1, 2)
    assert f"{given}: expected an environment folder" in out + err
    assert "found a file" in out + err and "no such folder" not in out + err


def test_the_python_api_names_a_file_as_a_file(tmp_path):
    import envforge

    given = tmp_path / "notes.txt"
    given.write_text("x\n")
    for call in (envforge.open, envforge.episodes):
        with pytest.raises(envforge.UserError, match="found a file"):
            call(given)


def test_an_actions_file_error_names_its_line_and_plays_nothing(tmp_path, capsys):
    from pathlib import Path

    from envforge.pipeline.cli import main

    crate_dock = Path(__file__).resolve().parent.parent / "generated_envs" / "reference" / "crate_dock"
    actions = tmp_path / "moves.txt"
    actions.write_text("# a comment\nmove south\n\nmove north east\nmove north\n")
    assert main(["play", str(crate_dock), "--level", "level_01", "--actions", str(actions)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"envforge play: error: --actions {actions}:4: expected an action (move, wait, with its "
                          f"parameters), found 'move north east': "), err
    assert "== crate_dock" not in out  # refused before the environment started: no step played
