"""What `envforge review show` says a reliability rejection means, read from the folder's
verification.json as review reads it (pipeline/review/details.py): a figure is quoted only when
verify's cause names it, or, in a record written before causes, when the recorded figures show it."""
from __future__ import annotations

from pathlib import Path

from pipeline import records
from pipeline.review import show
from pipeline.review.catalog import Entry
from pipeline.review.details import gather

NAME = "a_reward_for_guessing_0a1b2c"
REASON = "reward: expected a reward that pays for skill, found one action repeated, not skill, earns the reward"


def _folder(tmp_path: Path, cause: dict | None, random_mean: float = 0.12, planner_mean: float = 1.0) -> Entry:
    folder = tmp_path / NAME
    folder.mkdir()
    per_level = {f"levels/test_{i}.yaml": {"max_reward": 10.0, "max_certainty": "certified",
                                           "random_mean_total": 10 * random_mean, "planner_total": 10 * planner_mean,
                                           "random_normalized": random_mean, "planner_normalized": planner_mean}
                 for i in (1, 2)}
    verification = {"accepted": False, "stage": "reliability", "reason": REASON,
                    "stages": {"reliability": {"levels": 2, "episodes": 20, "margin": 0.2, "per_level": per_level,
                                               "random_normalized": random_mean,
                                               "planner_normalized": planner_mean}}}
    if cause is not None:
        verification["cause"] = cause
    (folder / "verification.json").write_text(records.dumps("verification", verification))
    return Entry(NAME, "a reward for guessing", "themes.txt:1", "rejected", "reliability", REASON, str(folder),
                 "rejected")


def _means(entry: Entry) -> str:
    out = show.explain(gather(entry))
    return next(line for line in out.splitlines() if line.startswith("means:"))


def test_a_record_without_a_cause_makes_no_claim_its_figures_do_not_support(tmp_path):
    """Written before causes: random 12% against the planner's 100% is no "random does as well"."""
    means = _means(_folder(tmp_path, None))
    assert means == ("means:  the reliability check found the reward does not measure skill (see the reason and "
                     "the reliability figures)")
    assert "random play does about as well as search" not in means


def test_a_record_without_a_cause_whose_figures_show_random_as_good_says_so(tmp_path):
    means = _means(_folder(tmp_path, None, random_mean=0.85, planner_mean=0.95))
    assert means == ("means:  the random agent scored 85% of the max and the search planner 95%: random play does "
                     "about as well as search, so the reward does not measure skill")


def test_a_degenerate_policy_cause_names_the_policy_on_one_line_and_cut(tmp_path):
    policy = "repeating RESEARCH\x1b]52;c;aGk=\x07\nok: accepted" + "x" * 300
    cause = {"kind": "degenerate_policy", "policy": policy, "action": {"action": "RESEARCH"}, "normalized": 0.93,
             "planner_normalized": 1.0, "margin": 0.2, "levels": 2}
    means = _means(_folder(tmp_path, cause))
    assert means.startswith("means:  repeating RESEARCH\\x1b]52;c;aGk=\\x07 ok: accepted")
    assert means.endswith("… until the episode ends earns 93% of the max (the search planner 100%): the reward "
                          "does not measure skill")
    assert "\x1b" not in means and "\x07" not in means and "x" * 80 not in means
    assert "random play" not in means


def test_a_no_better_than_random_cause_quotes_its_own_figures(tmp_path):
    cause = {"kind": "no_better_than_random", "planner_normalized": 0.5, "random_normalized": 0.4, "margin": 0.2,
             "levels": 2}
    means = _means(_folder(tmp_path, cause))
    assert means == ("means:  the random agent scored 40% of the max and the search planner 50%: random play does "
                     "about as well as search, so the reward does not measure skill")


def test_a_cause_of_a_kind_this_envforge_does_not_know_keeps_the_figures_shown(tmp_path):
    """A newer envforge's cause kind: the verdict, figures and the kind are shown; no claim is made."""
    out = show.explain(gather(_folder(tmp_path, {"kind": "from_a_newer_envforge", "x": 1})))
    assert f"== verification ==\n  rejected at reliability: {REASON}\n" \
           "  cause: from_a_newer_envforge (a kind this envforge does not know)\n" in out
    assert "random_normalized 0.12, planner_normalized 1.0" in out
    assert "means:  the reliability check found the reward does not measure skill (see the reason and the " \
           "reliability figures)" in out


def test_a_cause_naming_both_failures_reads_back_when_one_part_named_no_cause(tmp_path):
    cause = {"kind": "generator_and_shipped_levels_fail", "generator": None,
             "shipped": {"kind": "val_test_overlap", "overlapping": 1, "distinct": 3, "shipped": 4}}
    out = show.explain(gather(_folder(tmp_path, cause)))
    assert "  cause: generator_and_shipped_levels_fail\n" in out
    assert "random_normalized 0.12, planner_normalized 1.0" in out
