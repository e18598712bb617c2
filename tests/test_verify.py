"""`envforge verify`: what a user sees for the reference environments and for each kind of broken one."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import envforge
from sandbox_kit import side_by_side

from envforge.pipeline.testing.tiny_env import CONFIG, ENV_GENERATE, ENV_MAIN, write_env

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"


def verify_cmd(env_dir: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "envforge", "verify", str(env_dir), *flags]


def verify(env_dir: Path, *flags: str, process: bool = False) -> subprocess.CompletedProcess:
    return envforge("verify", env_dir, *flags, process=process)


@pytest.fixture
def reference_runs(verified_reference):
    """name -> (exit code, stdout, stderr, folder) of `envforge verify --json` on a copy of that
    reference env, made once for the session (conftest.py's verified_reference; test_search compares
    a run under load with it). Read the folder; copy it to write into it."""
    def run(name: str) -> tuple[int, str, str, Path]:
        done = verified_reference(name)
        return done.returncode, done.stdout, done.stderr, done.out

    return run


@pytest.mark.parametrize("name", ["crate_dock", "tide_pool"])
def test_accepts_reference_env_with_every_figure_recorded(reference_runs, name):
    code, stdout, stderr, folder = reference_runs(name)
    report = json.loads(stdout)
    assert code == 0, report["reason"] + stderr
    assert report["accepted"] is True and report["stage"] is None
    assert json.loads((folder / "verification.json").read_text())["accepted"] is True
    stages = report["stages"]
    assert stages["execution"]["episodes"] >= 45 and stages["execution"]["failures_by_kind"] == {}
    levels = stages["levels"]
    assert levels["generated_kept"] == 15 and levels["duplicates"] == 0 and levels["search_nodes"] > 0
    reliability = stages["reliability"]
    assert reliability["planner_normalized"] == 1.0
    assert reliability["random_normalized"] < reliability["planner_normalized"] - reliability["margin"]
    for stage in ("execution", "levels", "reliability", "total"):
        assert stages[stage]["wall_seconds"] > 0 and stages[stage]["cpu_seconds"] >= 0
    # Max rewards for the shipped levels: validator bound and search agree, with a witness each.
    max_rewards = json.loads((folder / "level_max_rewards.json").read_text())
    shipped = json.loads((REFERENCE / name / "level_max_rewards.json").read_text())
    assert set(max_rewards["levels"]) == set(shipped["levels"])
    for key, entry in max_rewards["levels"].items():
        assert entry["max_reward"] == shipped["levels"][key]["max_reward"] == entry["search_reward"]
        assert entry["validator_bound"] == entry["max_reward"] and entry["corrected"] is False
        assert entry["witness"] and entry["calculation_method"] == "validator_analytic+search_witness"
    assert max_rewards["summary"]["total_levels"] == 15
    baseline = json.loads((folder / "manifest.json").read_text())["difficulty_baseline"]
    assert set(baseline["random_normalized"]) == set(shipped["levels"])


def test_verify_records_the_options_it_ran_with(reference_runs):
    folder = reference_runs("crate_dock")[3]
    options = json.loads((folder / "verification.json").read_text())["options"]
    assert options["search_nodes"] == 20_000 and options["margin"] == 0.2 and options["random_episodes"] == 5
    assert options["write"] is True and options["limits"]["call_seconds"] == 10.0 and "progress" not in options


def test_verify_random_baseline_is_evaluates_random_agent(reference_runs, tmp_path):
    """verify's random episodes on a level are `envforge evaluate --agent random`'s runs there: the
    difficulty baseline in manifest.json and the random row of an evaluation measure one agent."""
    folder = reference_runs("crate_dock")[3]
    per_level = json.loads((folder / "verification.json").read_text())["stages"]["reliability"]["per_level"]
    out = tmp_path / "evaluation"
    done = envforge("evaluate", folder, "--agent", "random", "--runs", "5", "--max-levels", "3", "--out", out)
    assert done.returncode == 0, done.stderr
    totals: dict[str, list[float]] = {}
    for line in (out / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        totals.setdefault(Path(record["level"]).name, []).append(record["total_reward"])
    assert len(totals) == 3 and all(len(t) == 5 for t in totals.values())
    for level, runs in totals.items():
        assert round(sum(runs) / len(runs), 4) == per_level[level]["random_mean_total"], level


def test_verify_leaves_shipped_levels_alone(reference_runs):
    folder = reference_runs("crate_dock")[3]
    for level in sorted((REFERENCE / "crate_dock").glob("*levels/*.yaml")):
        assert (folder / level.parent.name / level.name).read_bytes() == level.read_bytes()


def test_accepts_sound_env_and_writes_generated_levels_only_when_asked(tmp_path):
    env = write_env(tmp_path / "corridor")
    before = {p: p.read_bytes() for p in env.rglob("*.yaml")}
    result = verify(env, "--write")
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().splitlines()[-1] == f"accepted: {env}"
    assert {p: p.read_bytes() for p in env.rglob("*.yaml") if p.parent.name != "_generated"} == before
    assert set(json.loads((env / "level_max_rewards.json").read_text())["levels"]) == {
        "level_01.yaml", "level_02.yaml", "level_03.yaml"}
    shipped = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    # The generated levels only judge the generator here: each searched until it is shown fit.
    assert json.loads((env / "verification.json").read_text())["stages"]["levels"]["generated_searched_until_fit"]

    result = verify(env, "--write-levels", "--stages", "levels", "--json")
    assert result.returncode == 0, result.stdout
    assert len(list((env / "levels").glob("*.yaml"))) == 10 and len(list((env / "val_levels").glob("*.yaml"))) == 5
    written = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    assert len(written) == 15 and json.loads(result.stdout)["stages"]["levels"]["generated_searched_until_fit"] is False
    # Kept levels are certified with the whole search: every max of the corridor's binary reward is exact.
    assert all(entry["exact"] and entry["max_reward"] == 1.0 for entry in written.values())
    assert all(entry["exact"] for entry in shipped.values())


def test_levels_are_searched_and_scored_on_every_core_with_the_same_figures_as_on_one(tmp_path):
    """VerifyRunOptions.workers (default: every core) workers certify levels and play the reliability
    episodes at once; each level's search and episodes do not depend on which worker runs them."""
    from envforge.pipeline.verify import verify_env
    from envforge.pipeline.verify.context import VerifyRunOptions

    env = write_env(tmp_path / "corridor")
    one, two = (verify_env(env, options=VerifyRunOptions(workers=n, test_levels=2, val_levels=1)) for n in (1, 2))
    assert one.accepted and two.accepted, (one.reason, two.reason)
    assert (one.stages.levels.search_workers, two.stages.levels.search_workers) == (1, 2)
    assert (one.stages.reliability.workers, two.stages.reliability.workers) == (1, 2)
    for stage, keys in (("levels", ("max_rewards", "exact_levels", "search_nodes")),
                        ("reliability", ("per_level", "episodes", "random_normalized", "planner_normalized"))):
        assert {k: getattr(getattr(one.stages, stage), k) for k in keys} == \
            {k: getattr(getattr(two.stages, stage), k) for k in keys}



def test_levels_are_generated_on_every_core_with_the_same_seeds_and_levels_as_on_one(tmp_path):
    """The generator and validator run on every worker, ahead of the seed being judged, yet the
    seeds are judged in order: the same seeds tried, duplicates, rejections, kept levels and
    examples on one worker and on two; a seed generated ahead that the run never reaches (12, whose
    generator raises) is dropped, its failure never raised."""
    from envforge.pipeline.verify import verify_env
    from envforge.pipeline.verify.context import VerifyRunOptions

    generator = ENV_GENERATE.replace(
        "    rng = random.Random(seed)\n",
        "    if seed == 12:\n        raise RuntimeError('seed 12 is never reached')\n"
        "    seed = seed - 1 if seed % 3 == 0 else seed  # a duplicate of the seed before\n"
        "    rng = random.Random(seed)\n").replace(
        '"goal": rng.randint(2, length - 1)', '"goal": 0 if seed % 4 == 0 else rng.randint(2, length - 1)')
    envs = [write_env(tmp_path / f"corridor_{n}", replace={"env_generate.py": generator}) for n in (1, 2)]
    runs = [verify_env(env, ("levels",),
                       VerifyRunOptions(workers=n, test_levels=4, val_levels=2, write_levels=True, write=True))
            for n, env in zip((1, 2), envs)]
    one, two = (run.stages.levels for run in runs)
    assert runs[0].accepted and runs[1].accepted, (runs[0].reason, runs[1].reason)
    assert (one.search_workers, two.search_workers) == (1, 2)
    # seeds 1..11: 3, 6 and 9 repeat the seed before, 4 and 8 put the goal on the start (rejected)
    assert (one.seeds_tried, one.duplicates, one.rejected_by_validator, one.generated_kept) == (11, 3, 2, 6)
    keys = ("seeds_tried", "duplicates", "rejected_by_validator", "unfit", "distinct_levels", "generated_kept",
            "examples", "levels_scored", "max_rewards", "search_nodes")
    assert {k: getattr(one, k) for k in keys} == {k: getattr(two, k) for k in keys}
    for env in envs:
        entries = json.loads((env / "level_max_rewards.json").read_text())["levels"]
        assert [entry["seed"] for entry in entries.values()] == [1, 2, 5, 7, 10, 11]



def test_a_shipped_level_equal_to_a_generated_one_is_searched_once_when_its_fit_search_ended_on_a_proof(tmp_path):
    """The generated levels only judge the generator (searched until fit); a shipped level equal to
    one of them reuses its search when it ended on a proof (the corridor's binary reward met), so
    each level is searched once (crate_dock: 81,686 nodes were twice 40,843), with the same maxima."""
    from envforge.pipeline.verify import verify_env
    from envforge.pipeline.verify.context import VerifyRunOptions

    env = write_env(tmp_path / "corridor")
    written = verify_env(env, ("levels",), VerifyRunOptions(test_levels=2, val_levels=1, write_levels=True, write=True))
    assert written.accepted, written.reason
    again = verify_env(env, ("levels",), VerifyRunOptions(test_levels=2, val_levels=1, write=True))
    assert again.accepted and again.stages.levels.generated_searched_until_fit, again.reason
    entries = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    assert len(entries) == 3 and all(entry["exact"] for entry in entries.values())
    assert again.stages.levels.search_nodes == sum(entry["search_nodes"] for entry in entries.values())
    assert again.stages.levels.max_rewards == written.stages.levels.max_rewards
    assert again.stages.levels.exact_levels == written.stages.levels.exact_levels

def test_verify_budget_is_a_safety_stop_that_judges_nothing(tmp_path):
    """--budget (wall clock of the model-free stages) cut verify: an error that says which limit cut
    which stage and that it depends on machine load; no rejection printed or recorded, even with
    --write (a sound env: only the budget stops it)."""
    env = write_env(tmp_path / "corridor")
    result = verify(env, "--budget", "0.001", "--write", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert re.search(r"^envforge verify: infrastructure failure: verify's wall-clock budget of 0\.001s \(--budget\) "
                     r"ran out during the execution stage, after \d+s: a safety stop, not a verdict on the environment "
                     r"\(where it cuts depends on machine load\); nothing was judged or recorded", result.stderr,
                     re.M), result.stderr
    assert not (env / "verification.json").exists() and not (env / "level_max_rewards.json").exists()
    again = verify(env, "--json")  # the same env within its budget is judged
    assert again.returncode == 0, again.stdout

def rejected(env: Path, stage: str) -> dict:
    result = verify(env, "--json", "--write")
    report = json.loads(result.stdout)
    assert result.returncode == 1, report
    assert report["accepted"] is False and report["stage"] == stage, report["reason"]
    assert json.loads((env / "verification.json").read_text())["reason"] == report["reason"]
    return report


@pytest.mark.parametrize("done, episode", [
    ("return False", 1),
    ('return self._state["pos"] == self._state["goal"] or self._t > self.max_steps', 2)],  # 1 reaches the goal
    ids=["never", "one_step_late"])
def test_env_whose_done_is_never_true_is_truncated_by_the_runtime_and_warned_about(tmp_path, done, episode):
    """The step cap is the runtime's (issue 13): no rejection, a warning in the execution figures,
    whether done() never becomes true (and the DSL declares no end condition) or becomes true a step
    after the cap (AutoEnv's 23_DangerDetection, whose step() reads done() before counting the step)."""
    config = json.loads(json.dumps(CONFIG))
    if done == "return False":
        config["termination"]["conditions"] = []
    env = write_env(tmp_path / "e", config=config, replace={"env_main.py": (
        'return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps', done)})
    result = verify(env, "--json", "--stages", "execution")
    report = json.loads(result.stdout)
    execution = report["stages"]["execution"]
    assert execution["warnings"][0].startswith(
        "env_main.py: expected done() to become true by termination.max_steps=12, "
        f"found still running after 12 steps of a random episode {episode} on levels/level_01.yaml")
    assert execution["failures_by_kind"] == {} and execution["truncated_episodes"] >= 1
    assert result.returncode == 0, report


def test_env_whose_done_ends_the_episode_at_the_cap_gets_no_truncation_warning(tmp_path):
    """The corridor's done() is true at t >= max_steps: the runtime still counts a truncation, but
    nothing says done() never became true."""
    result = verify(write_env(tmp_path / "e"), "--json", "--stages", "execution")
    execution = json.loads(result.stdout)["stages"]["execution"]
    assert result.returncode == 0 and execution["truncated_episodes"] >= 1
    assert "warnings" not in execution


def test_rejects_env_that_goes_on_after_a_dsl_end_condition_holds_at_execution(tmp_path):
    """config.yaml says the episode ends when pos == goal; done() ignores it (ends only at the cap)."""
    env = write_env(tmp_path / "e", replace={"env_main.py": (
        'return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps',
        "return self._t >= self.max_steps")})
    report = rejected(env, "execution")
    assert re.fullmatch(r"env_main\.py: expected the episode to end when config\.yaml termination\.conditions\[0\] "
                        r"\('pos == goal'\) holds, found done\(\) false and the episode going on after step \d+ "
                        r"\(move\(direction='(left|right)'\)\) of a (random|planner) episode( \d)? on "
                        r"levels/level_01\.yaml, where it holds", report["reason"]), report["reason"]
    assert report["stages"]["execution"]["end_conditions"] == {"checked": ["pos == goal"], "unchecked": {}}


def test_end_conditions_outside_the_grammar_or_the_state_are_listed_unchecked(tmp_path):
    config = json.loads(json.dumps(CONFIG))
    config["termination"]["conditions"] = ["pos == goal", "any(x.values()) > 1", "agent.gone == true"]
    result = verify(write_env(tmp_path / "e", config=config), "--json", "--stages", "execution")
    report = json.loads(result.stdout)
    assert result.returncode == 0, report["reason"]
    ends = report["stages"]["execution"]["end_conditions"]
    assert ends["checked"] == ["pos == goal"]
    assert set(ends["unchecked"]) == {"any(x.values()) > 1", "agent.gone == true"}
    assert ends["unchecked"]["agent.gone == true"].startswith("the state cannot answer it")


def test_rejects_env_that_crashes_on_one_action_at_execution(tmp_path):
    env = write_env(tmp_path / "e", replace={"env_main.py": (
        'step = 1 if params["direction"] == "right" else -1',
        'step = 1 if params["direction"] == "right" else -1 // 0')})
    report = rejected(env, "execution")
    assert report["reason"].startswith("env_main.py:8: expected a random episode 1 on levels/level_01.yaml to run "
                                       "without failure, found exception: ZeroDivisionError")
    assert "move(direction='left')" in report["reason"]
    assert report["stages"]["execution"]["failures_by_kind"] == {"exception": 1}


def test_rejects_generator_that_ignores_its_seed_at_levels(tmp_path):
    env = write_env(tmp_path / "e", replace={"env_generate.py": (
        "rng = random.Random(seed)", "seed = 42\n    rng = random.Random(seed)")})
    report = rejected(env, "levels")
    assert report["reason"] == ("env_generate.py: expected generate_level(seed, config) to make different levels for "
                                "different seeds, found the same level for all 45 seeds 1..45 (the generator "
                                "ignores its seed); the 3 shipped level(s) were checked and certified anyway (see "
                                "the levels figures)")
    assert report["stages"].get("levels") is None or report["stages"]["levels"]["duplicates"] == 44
    assert set(report["stages"]["levels"]["max_rewards"]) == {"level_01.yaml", "level_02.yaml", "level_03.yaml"}


def test_rejects_validator_that_accepts_unsolvable_levels_at_levels(tmp_path):
    # Longer corridors: some goals lie more than max_steps (12) moves away; the validator still accepts them.
    env = write_env(tmp_path / "e", replace={"env_generate.py": ("length = 6 + seed % 5", "length = 20 + seed % 5")})
    report = rejected(env, "levels")
    assert report["reason"].startswith("env_validator.py: expected validate_level to reject levels that no action "
                                       "sequence can score on, found it accepted")
    assert "search achieves nothing: the best of exhaustive search over" in report["reason"]


def test_rejects_constant_reward_at_reliability(tmp_path):
    constant = ENV_MAIN.replace('reached = self._state["pos"] == self._state["goal"]', "reached = True").replace(
        'return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps',
        "return self._t >= self.max_steps")
    config = json.loads(json.dumps(CONFIG))
    config["termination"]["conditions"] = []  # no end state: the episode always runs to the cap
    env = write_env(tmp_path / "e", replace={"env_main.py": constant}, config=config)
    report = rejected(env, "reliability")
    figures = report["stages"]["reliability"]
    assert figures["random_normalized"] == figures["planner_normalized"] == 1.0
    # Repeating any one action earns it all: the first constant policy tried is named.
    assert report["reason"] == ("reward: expected a reward that pays for skill, found that repeating "
                                "move(direction='left') until the episode ends scores 1.00 of the max (mean over 3 "
                                "level(s); the search planner 1.00, margin 0.2): one action repeated, not skill, "
                                "earns the reward")


def test_rejects_reward_a_constant_action_earns_naming_the_policy(tmp_path):
    """Every goal lies to the right of the start: the random agent rarely gets there, but repeating
    one move always does. The verdict names that policy, and the figures hold every one tried."""
    right_only = {"levels/level_01.yaml": {"pos": 0, "goal": 3, "length": 6},
                  "levels/level_02.yaml": {"pos": 0, "goal": 5, "length": 8},
                  "val_levels/level_03.yaml": {"pos": 0, "goal": 4, "length": 7}}
    env = write_env(tmp_path / "e", levels=right_only)
    report = rejected(env, "reliability")
    figures = report["stages"]["reliability"]
    assert figures["random_normalized"] < figures["planner_normalized"] - figures["margin"]
    assert report["reason"].startswith("reward: expected a reward that pays for skill, found that repeating "
                                       "move(direction='right') until the episode ends scores 1.00 of the max")
    assert figures["constant_policies"] == ["repeating move(direction='left')", "repeating move(direction='right')"]
    assert figures["constant_normalized"] == {"repeating move(direction='right')": 1.0,
                                              "repeating move(direction='left')": 0.0}


def test_corrects_validator_bound_below_what_search_achieves(tmp_path):
    env = write_env(tmp_path / "e", replace={"env_validator.py": ("return 1.0", "return 0.5")})
    result = verify(env, "--json", "--write")
    report = json.loads(result.stdout)
    assert result.returncode == 0, report["reason"]
    entries = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    for entry in entries.values():
        assert entry["validator_bound"] == 0.5 and entry["corrected"] is True
        assert entry["max_reward"] == entry["search_reward"] == 1.0
        assert entry["calculation_method"] == "search_witness" and "corrected" in entry["notes"]
    assert report["stages"]["levels"]["corrected"] == 3
    for scores in report["stages"]["reliability"]["per_level"].values():
        assert 0 <= scores["random_normalized"] <= 1 and scores["planner_normalized"] == 1.0


def test_stages_flag_runs_only_what_is_asked_and_rejects_unknown_stage(tmp_path):
    env = write_env(tmp_path / "corridor")
    report = json.loads(verify(env, "--json", "--stages", "execution").stdout)
    assert report["accepted"] is True and set(report["stages"]) == {"execution", "total"}
    result = verify(env, "--stages", "levels,speed")
    assert result.returncode == 2 and "--stages: expected some of execution,levels,reliability" in result.stderr


EXECUTION_BREAKAGES = {
    "step_hangs": ({"env_main.py": ('self._last_action_result = "moved " + params["direction"]',
                                    'while True:\n                pass')},
                   "expected a random episode 1 on levels/level_01.yaml to run without failure, found timeout: "
                   "'step' took longer than 1s"),
    "nan_reward": ({"env_main.py": ("else (0.0, [], {})", "else (float('nan'), [], {})")},
                   "found invalid_reward: reward: expected a finite number, found nan"),
    "string_reward": ({"env_main.py": ("else (0.0, [], {})", "else ('zero', [], {})")},
                      "found invalid_reward: reward: expected a finite number, found 'zero'"),
    "empty_observation": ({"env_main.py": ("return f\"step {omega['t']}: \" + \"\".join(cells)", "return ''")},
                          "env_main.py: expected a non-empty observation after reset on levels/level_01.yaml, "
                          "found ''"),
}


@pytest.mark.parametrize("case", sorted(EXECUTION_BREAKAGES))
def test_rejects_env_that_breaks_during_rollouts_at_execution(tmp_path, case):
    replace, expected = EXECUTION_BREAKAGES[case]
    env = write_env(tmp_path / case, replace=replace)
    # The hang runs under a short call limit, which is what fires: the env's `step`, not the worker's
    # start (timed apart, by its own start-up limit) nor the env's import.
    result = verify(env, *(("--call-seconds", "1") if case == "step_hangs" else ()))
    assert result.returncode == 1, result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("REJECTED at execution: ") and expected in last, last
    assert "start" not in last and "'load'" not in last, last


# A generator and a validator slow on one level (the corridor of length 8: seed 2's, and the shipped
# levels/level_02.yaml), as one that searches a level's whole space is on a busy machine.
SLOW_GENERATOR = {
    "env_generate.py": ENV_GENERATE.replace("import random\n", "import random\nimport time\n").replace(
        "    rng = random.Random(seed)\n",
        "    rng = random.Random(seed)\n    if seed == 2:\n        time.sleep(2.5)\n"),
    "env_validator.py": ("def validate_level(state):\n", "import time\n\n\ndef validate_level(state):\n"
                         "    if state.get('length') == 8:\n        time.sleep(2.5)\n"),
}


def test_a_call_limit_on_a_slow_generator_or_validator_does_not_decide_the_verdict(tmp_path):
    """Generator and validator calls have their own safety stop (--generator-seconds), not the call
    limit, and a worker's start its own limit: a call limit far below the generator's time, on a
    busy machine (the command and its workers running a third of the time, as two busy loops on two
    cores leave them), gives the same verdict and figures as a generous one on the machine as it is."""
    def run(call_seconds: str) -> dict:
        env = write_env(tmp_path / f"call{call_seconds}", replace=SLOW_GENERATOR)
        result = verify(env, "--stages", "levels", "--call-seconds", call_seconds, "--json", process=True)
        report = json.loads(result.stdout)
        assert result.returncode == 0, report["reason"]
        return report

    generous, tight = side_by_side(lambda: run("60"), lambda: run("1"), running=1 / 3)
    assert tight["reason"] == generous["reason"] and tight["reason"].startswith("accepted: levels passed")
    for figure in ("seeds_tried", "generated_kept", "max_rewards", "exact_levels"):
        assert tight["stages"]["levels"][figure] == generous["stages"]["levels"][figure], figure
    assert "generator_safety_stop" not in tight["stages"]["levels"]


def test_a_generator_that_never_finishes_is_stopped_by_its_safety_stop_and_labelled(tmp_path):
    env = write_env(tmp_path / "endless", replace={"env_generate.py": (
        "    rng = random.Random(seed)\n", "    rng = random.Random(seed)\n    while seed == 3:\n        pass\n")})
    result = verify(env, "--stages", "levels", "--generator-seconds", "3", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["stage"] == "levels", report["reason"]
    assert report["reason"].startswith(
        "env_generate.py: expected generate_level to make a level for seed 3, found safety_stop: generate_level for "
        "seed 3 ran past its wall-clock safety stop of 3s (generator_seconds, not the call limit: a verdict it "
        "decides depends on machine load)"), report["reason"]
    assert "the 3 shipped level(s) were checked and certified anyway" in report["reason"]
    assert report["stages"]["levels"]["generator_safety_stop"].startswith("generate_level for seed 3 ran past")


def test_a_worker_slow_to_start_is_an_infrastructure_fault_not_a_verdict(tmp_path, monkeypatch, capsys):
    """A start-up limit no worker can meet stands in for a machine too busy to start one in time:
    verify says "infrastructure failure ... nothing was judged", exit 1, and writes no verdict."""
    import dataclasses

    from envforge.pipeline import cli
    from envforge.pipeline.api import verify as verify_api

    env = write_env(tmp_path / "sound")
    defaults = verify_api._STAGE_DEFAULTS  # the library's one source of the stage options' defaults
    monkeypatch.setattr(verify_api, "_STAGE_DEFAULTS", dataclasses.replace(
        defaults, limits=dataclasses.replace(defaults.limits, start_seconds=0.001)))
    code = cli.main(["verify", str(env), "--write"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert ("envforge verify: infrastructure failure: the sandbox worker for sound did not report ready within its "
            "start-up limit of 0.001s") in err and "(nothing was judged; run the same command again" in err, err
    assert "REJECTED" not in out and not (env / "verification.json").exists(), out


def test_search_keeps_states_at_different_steps_apart_when_asked(tmp_path):
    """An env whose reward reads the step counter: the goal pays only at step 7. Merging equal
    states reached at different steps (fast) misses it; keeping them apart (sound) finds it."""
    from envforge.pipeline.envfolder.actions import ActionSpace
    from envforge.pipeline.envfolder.spec import EnvSpec
    from envforge.pipeline.planner import replay
    from envforge.pipeline.sandbox.outside.client import EnvClient
    from envforge.pipeline.testing.tiny_env import CONFIG

    on_the_clock = ENV_MAIN.replace('reached = self._state["pos"] == self._state["goal"]',
                                    'reached = self._state["pos"] == self._state["goal"] and self._t == 6').replace(
        'return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps',
        "return self._t >= self.max_steps")
    env = write_env(tmp_path / "clock", replace={"env_main.py": on_the_clock})
    actions = ActionSpace.from_config(CONFIG).candidates()
    with EnvClient.open(EnvSpec.open(env), max_steps=12) as worker:
        worker.reset("levels/level_01.yaml")
        merged = worker.search(actions, 12, time_in_key=False)
        keyed = worker.search(actions, 12, time_in_key=True)
        assert (merged.best_reward, keyed.best_reward) == (0.0, 1.0)
        assert keyed.exhausted and keyed.stopped is None and len(keyed.witness) == 7
        worker.reset("levels/level_01.yaml")
        assert replay(worker, keyed.witness) == (1.0, False, 7)
        small = worker.search(actions, 12, max_nodes=10)
        assert (small.nodes, small.exhausted, small.stopped) == (10, False, "nodes")
