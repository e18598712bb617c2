"""What `envforge review show` says a reliability rejection means, read from the folder's
verification.json as review reads it (pipeline/review/details.py): a figure is quoted only when
verify's cause names it, or, in a record written before causes, when the recorded figures show it."""
from __future__ import annotations

import shutil
from pathlib import Path

from envforge.pipeline import records
from envforge.pipeline.review import show
from envforge.pipeline.review.catalog import Entry
from envforge.pipeline.review.details import gather

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


# -- a theme a budget cap stopped: the run database's typed cause, not the reason's words ---------------

BUDGET_REASON = ("budget exceeded: budget exceeded: theme 'a maze' has a cap of $0.0050, $0.0049 is spent or "
                 "committed, and the next call (design) could cost up to $0.0400; it was not made")
OLD_RUN_DB = """
    CREATE TABLE runs (id INTEGER PRIMARY KEY, started REAL, finished REAL, status TEXT, args TEXT, summary TEXT);
    CREATE TABLE themes (name TEXT PRIMARY KEY, theme TEXT, source TEXT, status TEXT, stage TEXT, reason TEXT,
                         run_id INTEGER, updated REAL, determined_by TEXT);
    CREATE TABLE stage_attempts (id INTEGER PRIMARY KEY, run_id INTEGER, theme TEXT, stage TEXT, started REAL,
        ended REAL, status TEXT, error TEXT, input_tokens INTEGER, output_tokens INTEGER, usd REAL, steps INTEGER,
        exit_status TEXT);
    PRAGMA user_version = 2;
"""


def _rejected_by_the_writer(tmp_path: Path, rejection, run_args: dict | None = None) -> Path:
    """An output folder where generate's one writer of a rejection recorded `rejection`, in a run
    the database recorded with `run_args` (default: none but the command)."""
    from envforge.pipeline import layout
    from envforge.pipeline.generate import package
    from envforge.pipeline.generate.rundb import RunDB
    from envforge.pipeline.generate.themes import Theme

    out = layout.OutputDir(tmp_path / "out")
    out.root.mkdir()
    db = RunDB(out.db)
    run = db.start_run({"command": "generate", **(run_args or {})})
    attempt = db.start_stage(run, "a_maze", rejection.stage)
    db.end_stage(attempt, "rejected", rejection.reason, usd=0.0049, exit_status="budget")
    package.reject(out.work("a_maze"), out, Theme("a_maze", "a maze", "themes.txt:1"), rejection, db, run)
    db.close()
    return out.root


def _old_run_db(tmp_path: Path, stage: str, reason: str, exit_status: str | None) -> Path:
    """An output folder whose run database an envforge before causes wrote (schema 2: no cause)."""
    import sqlite3

    root = tmp_path / "out"
    (root / "_rejected" / "a_maze").mkdir(parents=True)
    db = sqlite3.connect(root / "envforge.sqlite")
    db.executescript(OLD_RUN_DB)
    db.execute("INSERT INTO themes VALUES ('a_maze', 'a maze', 'themes.txt:1', 'rejected', ?, ?, 1, 0, '{}')",
               (stage, reason))
    db.execute("INSERT INTO stage_attempts (run_id, theme, stage, started, ended, status, error, exit_status) "
               "VALUES (1, 'a_maze', ?, 0, 1, 'rejected', ?, ?)", (stage, reason, exit_status))
    db.commit()
    db.close()
    return root


def _advice(root: Path) -> tuple[str, str]:
    from envforge.pipeline.review.catalog import Catalog

    with Catalog.open(root) as catalog:
        out = show.explain(gather(catalog.get("a_maze")))
    lines = out.splitlines()
    return next(ln for ln in lines if ln.startswith("means:")), next(ln for ln in lines if ln.startswith("next:"))


def test_a_theme_a_budget_cap_stopped_is_advised_from_the_cause_its_rejection_recorded(tmp_path):
    from envforge.pipeline.errors import Rejected
    from envforge.pipeline.generate.rundb import RunDB
    from envforge.pipeline.kinds import BudgetCapReached, Rejection

    cause = BudgetCapReached("theme", 0.005, 0.0049, 0.04)
    root = _rejected_by_the_writer(tmp_path, Rejected(BUDGET_REASON, "design", cause=cause))
    assert _advice(root) == (
        "means:  its model calls reached a budget cap before the stage finished; nothing is wrong with it yet",
        f"next:   `envforge review retry a_maze --from design --out {root}` with a model and a larger "
        f"--theme-budget-usd")
    db = RunDB(root / "envforge.sqlite")
    assert db.theme("a_maze")["cause"] == cause  # read back as its shape
    db.close()
    rejection = records.read(root / "_rejected" / "a_maze" / "rejection.json", Rejection)
    assert rejection.cause == cause and rejection.reason == BUDGET_REASON


def test_a_theme_the_run_budget_stopped_is_sent_to_resume(tmp_path):
    from envforge.pipeline.errors import Rejected
    from envforge.pipeline.kinds import BudgetCapReached

    rejected = Rejected(BUDGET_REASON.replace("theme 'a maze' has a cap of", "the run cap is"), "code",
                        cause=BudgetCapReached("run", 0.01, 0.0099, 0.03))
    root = _rejected_by_the_writer(tmp_path, rejected, {"themes": "my themes.txt", "model": "openai/gpt-4o"})
    assert _advice(root) == (
        "means:  the run's budget cap (--budget-usd) stopped its model calls before the stage finished; nothing is "
        "wrong with it yet",
        f"next:   `envforge generate --themes 'my themes.txt' --model openai/gpt-4o --out {root} --resume "
        f"--budget-usd 0.02` (the run's own settings and a larger --budget-usd) goes on from code")


def test_a_run_budget_stop_whose_run_recorded_no_themes_prints_no_command_that_fails_as_copied(tmp_path):
    from envforge.pipeline.errors import Rejected
    from envforge.pipeline.kinds import BudgetCapReached

    root = _rejected_by_the_writer(tmp_path, Rejected(BUDGET_REASON, "code",
                                                      cause=BudgetCapReached("run", 0.01, 0.0099, 0.03)))
    _, nxt = _advice(root)
    assert nxt == ("next:   the `envforge generate` command that made the run, with `--resume --budget-usd` and a "
                   "larger cap than 0.01, goes on from code")
    assert "FILE" not in nxt


def test_a_reason_quoting_budget_words_is_not_taken_for_a_budget_stop(tmp_path):
    """The environment's own message says "budget exceeded": the cause (a crash) decides, not the words."""
    from envforge.pipeline.errors import Rejected
    from envforge.pipeline.kinds import EnvCrashed

    reason = "env_main.py: expected step() to return, found RuntimeError('budget exceeded') on levels/test_1.yaml"
    root = _rejected_by_the_writer(tmp_path, Rejected(reason, "execution",
                                                      cause=EnvCrashed("crash", "env_main.py", "playing", "")))
    means, _ = _advice(root)
    assert means.startswith("means:  the environment's code fails when it is played")


def test_a_budget_stop_in_a_run_database_written_before_causes_is_known_by_its_exit_status(tmp_path):
    """Schema 2 recorded no cause: the rejecting attempt's exit status (a name, not words) tells a
    budget stop; opening the database upgrades it (its rows keep no cause)."""
    assert _advice(_old_run_db(tmp_path, "design", BUDGET_REASON, "budget")) == (
        "means:  its model calls reached a budget cap before the stage finished; nothing is wrong with it yet",
        f"next:   `envforge review retry a_maze --from design --out {tmp_path / 'out'}` with a model and a larger "
        f"--theme-budget-usd")
    import sqlite3

    db = sqlite3.connect(tmp_path / "out" / "envforge.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == records.SQLITE_SCHEMAS["run_db"] == 3
    assert db.execute("SELECT cause FROM themes").fetchall() == [(None,)]
    db.close()


def test_an_old_run_budget_stop_is_sent_to_resume(tmp_path):
    means, nxt = _advice(_old_run_db(tmp_path, "code", BUDGET_REASON, "run_budget"))
    assert means.startswith("means:  the run's budget cap (--budget-usd) stopped")
    assert nxt == ("next:   the `envforge generate` command that made the run, with `--resume --budget-usd` and a "
                   "larger cap, goes on from code")  # the old database recorded neither its themes nor its cap


def test_an_old_record_whose_words_say_budget_but_whose_exit_status_does_not_is_no_budget_stop(tmp_path):
    """Before causes, and before stages named how they ended: the reason's words alone claim nothing."""
    for exit_status in ("rejected", None):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        means, nxt = _advice(_old_run_db(tmp_path, "design", BUDGET_REASON, exit_status))
        assert means == "means:  the model's design stage did not produce usable files (see the reason)", exit_status
        assert "budget" not in means + nxt


def test_a_cause_in_the_run_database_this_envforge_cannot_read_claims_nothing(tmp_path):
    import sqlite3

    root = _old_run_db(tmp_path, "design", BUDGET_REASON, "rejected")
    from envforge.pipeline.generate.rundb import RunDB

    RunDB(root / "envforge.sqlite").close()  # upgraded: the cause column exists
    db = sqlite3.connect(root / "envforge.sqlite")
    for written in ('{"kind": "a_newer_kind", "x": 1}', "not json", '["budget_cap_reached"]',
                    '{"kind": "budget_cap_reached", "scope": "galaxy"}'):  # a scope no cap has
        db.execute("UPDATE themes SET cause=?", (written,))
        db.commit()
        means, _ = _advice(root)
        assert means == "means:  the model's design stage did not produce usable files (see the reason)", written
    db.close()
