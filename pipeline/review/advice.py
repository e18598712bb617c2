"""What a rejection means and the next command, for `review show` and the HTML report.

The reason a stage gives says what was expected and what was found; a reviewer also needs what
that says about the environment and what to run after fixing it. One rule here, read by both views.
"""
from __future__ import annotations

from dataclasses import dataclass

from envforge.pipeline import layout, quoting, terminal
from envforge.pipeline.generate import stages
from envforge.pipeline.kinds import (
    BudgetCapReached,
    DegeneratePolicy,
    DoingNothingScoresMax,
    NoBetterThanRandom,
    PlannerScoresNothing,
)
from envforge.pipeline.review.catalog import shorten
from envforge.pipeline.review.details import Details

VERIFY_CHECKS = tuple(name for name, _ in stages.get("verify").checks)


@dataclass(frozen=True)
class Advice:
    meaning: str  # what the failing figure says about the environment
    next: str  # what to do, naming the command

    def to_dict(self) -> dict:
        return {"meaning": self.meaning, "next": self.next}


def advise(d: Details) -> Advice | None:
    """For a rejected environment (the pipeline's verdict, or a reviewer's): what it means, what next."""
    e = d.entry
    if e.status != "rejected":
        return None
    # A command shown here is one a reviewer may paste into a shell, from any folder: complete (the
    # run's --out named), and what it names quoted.
    name, folder = quoting.shell(e.name), e.folder or "its folder"
    out = f" --out {quoting.shell(e.run)}" if e.run else ""
    check = f"`{quoting.command('envforge', 'check', e.folder)}`" if e.folder else "`envforge check FOLDER`"
    retry_verify = f"`envforge review retry {name} --from verify{out}`"
    fix_then_verify = f"after fixing it in {folder}, run {retry_verify} (no model needed)"
    if e.by_hand:
        return Advice("a reviewer rejected it by hand (see the human review)",
                      f"to reverse that, `envforge review accept {name} --reason TEXT{out}`")
    if isinstance(e.cause, BudgetCapReached):
        return _budget_cap_reached(e.cause, name, e.stage if e.stage in stages.NAMES else "design", out, e)
    if e.stage == "input":
        return Advice("the theme line itself was refused before any model call",
                      f"edit the theme in {e.source or 'the themes file'} and run `envforge generate` again")
    if e.stage == "reliability":
        return Advice(_reliability_meaning(d), "make the reward pay for what the agent achieves (config.yaml's "
                      f"reward, or {layout.ENV_MAIN}); {fix_then_verify}")
    if e.stage == "levels":
        return Advice("verification could not get enough distinct, valid, solvable levels with a certified max "
                      f"reward from the level generator ({layout.ENV_GENERATE}) and validator "
                      f"({layout.ENV_VALIDATOR})", f"fix the file the reason names; {fix_then_verify}")
    if e.stage == "execution":
        return Advice(
            "the environment's code fails when it is played (a crash, a hang, a bad observation or "
            "action handling on some level)",
            f"fix the file the reason names ({check} lists the problems); {fix_then_verify}",
        )
    if e.stage == "verify":  # the model-driven checks
        return Advice("a model-driven check failed: models of different strength play it the same way, or a model "
                      "judged the environment unfit (see the reason)", f"fix it in {folder}, then {retry_verify} "
                      "with the same --verify-models")
    if e.stage == "repair":
        return Advice("the coding agent could not make `envforge check` pass within its steps: the code still fails "
                      "the basic test (see the failing check)",
                      f"fix the code in {folder} ({check} lists the problems), then {retry_verify}; "
                      f"or `envforge review retry {name} --from repair{out}` with a model")
    if e.stage in stages.NAMES:
        return Advice(f"the model's {e.stage} stage did not produce usable files (see the reason)",
                      f"`envforge review retry {name} --from {e.stage}{out}` with a model, or edit the files in "
                      f"{folder} and retry from a later stage")
    return Advice(f"it was rejected at {e.stage or 'an unknown stage'} (see the reason)",
                  f"fix it in {folder}, then {retry_verify}")


def _budget_cap_reached(cause: BudgetCapReached, name: str, stage: str, out: str, e) -> Advice:
    if cause.scope == "run":
        return Advice("the run's budget cap (--budget-usd) stopped its model calls before the stage finished; "
                      "nothing is wrong with it yet",
                      f"{_generate_again(e, cause)} goes on from {stage}")
    return Advice("its model calls reached a budget cap before the stage finished; nothing is wrong with it yet",
                  f"`envforge review retry {name} --from {stage}{out}` with a model and a larger --theme-budget-usd")


def _generate_again(e, cause: BudgetCapReached) -> str:
    """The generate command that resumes the run `e` belongs to with twice its budget (its themes,
    model and base URL as the run database recorded them), in backticks; where the database recorded
    no themes (a run made before it did), what to add to the command that made the run, since a
    command with a placeholder fails as copied."""
    args = e.run_args if isinstance(e.run_args, dict) and e.run_args.get("command") == "generate" else {}
    given = lambda key: [f"--{key.replace('_', '-')}", str(args[key])] if args.get(key) else []  # noqa: E731
    larger = f"{2 * cause.cap_usd:g}" if cause.cap_usd else None  # a cause recorded before caps were
    if not (args.get("demo") or args.get("themes")) or larger is None:
        return ("the `envforge generate` command that made the run, with `--resume --budget-usd` and a larger cap"
                + (f" than {cause.cap_usd:g}" if cause.cap_usd else "") + ",")
    themes = ["--demo"] if args.get("demo") else ["--themes", str(args["themes"])]
    return "`" + quoting.command("envforge", "generate", *themes, *given("model"), *given("base_url"),
                                 *(["--out", e.run] if e.run else []), "--resume", "--budget-usd", larger) + \
        "` (the run's own settings and a larger --budget-usd)"


def _reliability_meaning(d: Details) -> str:
    """What a reliability rejection says, from verify's cause; a figure is quoted only when the cause
    names it (or, for a record written before causes, when the recorded figures show it)."""
    figures = d.figures.reliability
    per_level = figures.per_level if figures else {}
    randoms = [v.random_normalized for v in per_level.values()]
    cause = d.cause
    if isinstance(cause, DoingNothingScoresMax):
        return "doing nothing scores the maximum: the reward pays for time passing, not for what the agent does"
    if randoms and all(isinstance(r, (int, float)) and r >= 1 for r in randoms):
        return (f"the random agent scored the max on every level ({len(randoms)}): the reward does not measure "
                f"skill")
    if isinstance(cause, DegeneratePolicy):
        return (f"{_quoted(cause.policy)} until the episode ends earns {cause.normalized:.0%} of the max (the search "
                f"planner {cause.planner_normalized:.0%}): the reward does not measure skill")
    if isinstance(cause, PlannerScoresNothing):
        return "the search planner scored nothing: no action sequence it found earns any reward"
    if isinstance(cause, NoBetterThanRandom):
        return _no_better_than_random(cause.random_normalized, cause.planner_normalized)
    if cause is None and figures and isinstance(figures.random_normalized, (int, float)) \
            and isinstance(figures.planner_normalized, (int, float)):  # written before causes: the figures decide
        if figures.planner_normalized <= 0:
            return "the search planner scored nothing: no action sequence it found earns any reward"
        if figures.random_normalized >= figures.planner_normalized - figures.margin:
            return _no_better_than_random(figures.random_normalized, figures.planner_normalized)
    return "the reliability check found the reward does not measure skill (see the reason and the reliability figures)"


def _no_better_than_random(random_mean: float, planner_mean: float) -> str:
    return (f"the random agent scored {random_mean:.0%} of the max and the search planner {planner_mean:.0%}: "
            f"random play does about as well as search, so the reward does not measure skill")


def _quoted(text: str, width: int = 80) -> str:
    """Text from the environment's record on one line, cut to `width`, every control character escaped."""
    return terminal.shown(shorten(text, width))
