"""Issue 37 item 4: guidance that works when copied. A mistyped flag, command or style gets one line
with a suggestion; a missing study is named as missing, not blamed on the provider; replay says
before the run which themes it can serve, and repeated errors are one line with a count.
"""
from __future__ import annotations

from cli_kit import REFERENCE, envforge

CRATE_DOCK = REFERENCE / "crate_dock"


def test_a_misspelled_flag_is_one_line_with_a_suggestion(tmp_path):
    done = envforge("evaluate", CRATE_DOCK, "--agent", "random", "--jsn", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == ("envforge evaluate: error: unrecognized arguments: --jsn — did you mean --json?; "
                           "`envforge evaluate --help` lists what it takes\n")
    assert done.stdout == ""


def test_a_misspelled_command_is_one_line_with_a_suggestion(tmp_path):
    done = envforge("evalute", CRATE_DOCK, cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("envforge: error: argument COMMAND: invalid choice: 'evalute' (choose from ")
    assert line.endswith(" — did you mean 'evaluate'?; `envforge --help` lists what it takes")


def test_a_misspelled_template_style_is_refused_with_a_suggestion_not_sent_to_a_model(tmp_path):
    done = envforge("reskin", CRATE_DOCK, "--style", "jsn", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "envforge reskin: error: --style jsn: expected json, narrative, inverse or a style for the model to write, "
        "found 'jsn', close to 'json': did you mean --style json? (to have the model write 'jsn', give it a --name)")
    assert not (CRATE_DOCK / "skins").exists()


def test_resuming_a_study_that_is_not_there_names_the_folder_not_the_provider(tmp_path):
    missing = tmp_path / "no_study"
    done = envforge("learn", "--resume", "--out", missing, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"envforge learn: error: --out {missing}: expected a study to resume (study.json, written by `envforge learn "
        f"--out {missing}`), found no such folder; give the study's folder, or leave out --resume to start one"]
    assert not missing.exists()


def test_replay_says_up_front_which_themes_it_serves_and_groups_their_errors(tmp_path):
    themes = tmp_path / "themes.txt"
    themes.write_text("".join(f"A theme number {i} about gardens\n" for i in range(1, 41)))
    done = envforge("generate", "--themes", themes, "--provider", "replay", "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2  # a theme that could not be judged
    err = done.stderr.strip().splitlines()
    assert err[0].startswith("replay: the recordings in ") and " serve 0 of these 40; the other 40 end in an error, " \
        "not a verdict, without a model call (first: a_theme_number_1_about_gardens_" in err[0]
    assert len(err) == 2, err  # the notice, then the errors as one line with their count
    assert err[1].startswith("envforge generate: a_theme_number_1_about_gardens_")
    assert " (and 39 more theme(s) alike: a_theme_number_2_about_gardens_" in err[1]
    assert err[1].endswith(" and 34 more)")
    grouped = [line for line in done.stdout.splitlines() if line.startswith("  error ")]
    assert len(grouped) == 1 and "— and 39 more theme(s) alike: " in grouped[0]
    assert max(len(line) for line in done.stdout.splitlines()) < 1000  # no line lists all forty
