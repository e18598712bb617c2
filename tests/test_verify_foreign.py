"""`envforge verify` on folders envforge did not make: read-only by default, shipped max rewards
are claims set beside what search finds, sound max rewards, shipped levels checked even when the
generator is broken."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_kit import envforge

from envforge.pipeline.testing.tiny_env import CONFIG, ENV_GENERATE, ENV_MAIN, write_env

pytestmark = pytest.mark.slow  # measured: a whole verify (or evaluate, reskin) in each test


def verify(env_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return envforge("verify", env_dir, *flags)


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_verify_of_a_foreign_folder_writes_nothing_there_unless_asked(tmp_path):
    env = write_env(tmp_path / "corridor")
    before = snapshot(env)
    out = tmp_path / "reports" / "corridor.json"
    result = verify(env, "--stages", "execution,levels", "--out", str(out))
    assert result.returncode == 0, result.stdout
    assert f"read-only: nothing written into {env}" in result.stdout
    assert snapshot(env) == before
    assert json.loads(out.read_text())["accepted"] is True

    assert verify(env, "--stages", "execution,levels", "--write").returncode == 0
    assert (env / "verification.json").is_file() and (env / "level_max_rewards.json").is_file()


def test_shipped_max_rewards_are_claims_reported_beside_what_search_finds(tmp_path):
    env = write_env(tmp_path / "corridor")
    claims = {"levels": {"level_01.yaml": {"max_reward": 1.0}, "level_02.yaml": {"max_reward": 0.5},
                         "level_03.yaml": {"max_reward": 3.0}}}
    (env / "level_max_rewards.json").write_text(json.dumps(claims))
    result = verify(env, "--stages", "execution,levels")
    assert result.returncode == 0, result.stdout
    line = next(x for x in result.stdout.splitlines() if x.startswith("claimed max rewards"))
    assert "1 beaten, 1 confirmed, 1 unreachable" in line
    assert "level_02.yaml claims 0.5, envforge scored 1" in line
    assert "level_03.yaml claims 3, the proved max is 1" in line  # its binary reward 1.0 (the DSL's) is met
    assert json.loads((env / "level_max_rewards.json").read_text()) == claims  # a claim, never rewritten

    report = json.loads(verify(env, "--stages", "execution,levels", "--json").stdout)
    compared = report["stages"]["levels"]["claims"]
    assert (compared["level_02.yaml"]["claimed"], compared["level_02.yaml"]["found"]) == (0.5, 1.0)
    assert compared["level_02.yaml"]["status"] == "beaten"
    assert compared["level_03.yaml"]["status"] == "unreachable" and compared["level_03.yaml"]["exact"] is True


def test_reward_paid_per_step_gets_a_max_at_least_doing_nothing_and_is_rejected_at_reliability(tmp_path):
    """0.1 per step whatever the agent does: the max is never below what waiting scores, and the
    reward, not the generator, is blamed."""
    per_step = (
        ENV_MAIN.replace('reached = self._state["pos"] == self._state["goal"]', "reached = False")
        .replace("(0.0, [], {})", "(0.1, ['tick'], {})")
        .replace(
            'return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps',
            "return self._t >= self.max_steps",
        )
        .replace(
            'if name == "move"',
            'if name == "wait":\n            self._last_action_result = "waited"\n        elif name == "move"',
        )
    )
    config = json.loads(json.dumps(CONFIG))
    config["transition"]["actions"].append({"name": "wait", "description": "Do nothing.", "params": []})
    config["termination"]["conditions"] = []  # no goal: the episode runs to the cap
    env = write_env(tmp_path / "ticks", replace={"env_main.py": per_step}, config=config)
    result = verify(env, "--json", "--write")
    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert report["stage"] == "reliability", report["reason"]
    assert report["reason"].startswith("reward: expected a reward that pays for skill, found that doing nothing "
                                       "(the no-op 'wait' until the episode ends) scores the maximum")
    assert "pays for time passing" in report["reason"]
    for entry in json.loads((env / "level_max_rewards.json").read_text())["levels"].values():
        assert entry["max_reward"] >= entry["nothing_reward"] - 1e-9 and entry["nothing_reward"] > 1.19
        assert entry["max_reward"] >= entry["best_seen"] - 1e-9
        assert entry["certainty"] != "certified" or entry["search_exhaustive"] or entry["validator_bound"] is not None


def test_shipped_levels_are_certified_even_when_the_generator_is_broken(tmp_path):
    env = write_env(tmp_path / "broken_gen", replace={"env_generate.py": (
        "    rng = random.Random(seed)", "    rng = random.Random(seed)\n    raise RuntimeError('no generator yet')")})
    result = verify(env, "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["stage"] == "levels"
    assert report["reason"].startswith("env_generate.py:6: expected generate_level to make a level for seed 1, "
                                       "found exception: RuntimeError in generate_level(): no generator yet")
    assert report["reason"].endswith(
        "the 3 shipped level(s) were checked and certified anyway (see the levels figures)"
    )
    assert report["stages"]["levels"]["max_rewards"] == {"level_01.yaml": 1.0, "level_02.yaml": 1.0,
                                                          "level_03.yaml": 1.0}


def test_evaluate_exits_nonzero_and_names_the_env_line_when_episodes_end_in_env_error(tmp_path):
    env = write_env(
        tmp_path / "crashy",
        replace={
            "env_main.py": (
                'step = 1 if params["direction"] == "right" else -1',
                'step = 1 if params["direction"] == "right" else -1 // 0',
            )
        },
    )
    result = envforge("evaluate", env, "--agent", "random", "--runs", "1", "--out", tmp_path / "out")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "episode(s) ended because the environment failed (env_error" in result.stderr
    assert "env_main.py:8: exception: ZeroDivisionError in transition(): integer division or modulo by zero" \
        in result.stderr, result.stderr


def test_a_search_too_small_to_score_is_no_verdict_on_the_env(tmp_path):
    """envforge's own narrowness (here a 3-node search budget) never becomes a flaw of the env:
    levels stay, their max is labelled unconfirmed, and reliability says it cannot tell."""
    env = write_env(tmp_path / "corridor")
    report = json.loads(verify(env, "--json", "--search-nodes", "3").stdout)
    assert report["accepted"] is True, report["reason"]
    assert "reliability inconclusive: the search planner scores only" in report["reason"]
    assert report["stages"]["levels"]["generated_kept"] == 15


def test_a_search_over_guessed_parameter_values_is_never_called_exhaustive(tmp_path):
    """An untyped parameter (AutoEnv's `params: [direction]`) gets guessed candidate values; a search
    over them that finds no reward proves nothing about the level, so no level is called unsolvable."""
    config = json.loads(json.dumps(CONFIG))
    config["transition"]["actions"][0]["params"] = ["direction"]
    env = write_env(tmp_path / "untyped", config=config)
    report = json.loads(verify(env, "--json", "--stages", "execution,levels").stdout)
    assert "accepted it" not in report["reason"] and "unsolvable" not in report["reason"], report["reason"]
    levels = report["stages"]["levels"]
    assert levels["generated_kept"] == 15 and levels["unfit"] == 0


def test_a_validator_that_refuses_every_level_is_refuted_by_witnesses_and_generation_is_unusable(tmp_path):
    """The validator's word is a claim: it refuses every level, yet search solves the shipped ones.
    Generation is unusable (every generated level refused); the shipped levels are judged by the
    evidence, certified, and the verdict names the refutation with a witness."""
    env = write_env(tmp_path / "picky", replace={"env_validator.py": (
        "    return (not issues, issues)", "    return False, ['reward 1.0 may be too low']")})
    result = verify(env, "--json", "--stages", "levels")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["stage"] == "levels"
    assert report["reason"].startswith("env_validator.py: expected the validator to accept some generated levels, "
                                       "found it rejects every one (36 of 36 distinct levels from seeds 1..45): "
                                       "generation is unusable; env_validator.py: validator refuted on 3 of 3 "
                                       "shipped level(s): it rejects them, yet a replayed search witness scores on "
                                       "each (e.g. level_01.yaml: rejected for 'reward 1.0 may be too low'; 3 "
                                       "action(s) score 1: move(direction='right'), move(direction='right'), "
                                       "move(direction='right'))"), report["reason"]
    assert report["reason"].endswith("the 3 shipped level(s) were checked and certified by search (see the levels "
                                     "figures)")
    levels = report["stages"]["levels"]
    assert set(levels["validator_refuted"]) == {"level_01.yaml", "level_02.yaml", "level_03.yaml"}
    assert levels["validator_refuted"]["level_02.yaml"]["witness"] == [
        {"action": "move", "params": {"direction": "left"}}] * 5
    assert levels["max_rewards"] == {"level_01.yaml": 1.0, "level_02.yaml": 1.0, "level_03.yaml": 1.0}
    human = verify(env, "--stages", "levels").stdout
    assert "validator refuted on 3 level(s)" in human


def test_a_validator_rejection_that_search_cannot_refute_stands(tmp_path):
    """A shipped level the validator refuses and no witness scores on stays rejected, with both said;
    the verdict still names the levels it refuses that a witness solves (the validator refuted there)."""
    levels = {"levels/level_01.yaml": {"pos": 0, "goal": 3, "length": 6, "picky": True},  # refused, 3 moves away
              "levels/level_02.yaml": {"pos": 0, "goal": 40, "length": 50}}  # 40 moves away, 12 allowed
    env = write_env(tmp_path / "far", levels=levels, replace={"env_validator.py": (
        '    if not 0 <= state.get("goal", -1) < state.get("length", 0) or state.get("goal") == state.get("pos"):',
        '    if state.get("goal", 0) > 20 or state.get("picky"):')})
    report = json.loads(verify(env, "--json", "--stages", "levels").stdout)
    assert report["stage"] == "levels"
    assert report["reason"].startswith("levels/level_02.yaml: expected the validator to accept this shipped level, "
                                       "found goal must lie inside the corridor, away from the start (and no search "
                                       "witness scores on it: exhaustive search over"), report["reason"]
    assert report["reason"].endswith("; env_validator.py: validator refuted on 1 of 2 shipped level(s): it rejects "
                                     "them, yet a replayed search witness scores on each (e.g. level_01.yaml: "
                                     "rejected for 'goal must lie inside the corridor, away from the start'; 3 "
                                     "action(s) score 1: move(direction='right'), move(direction='right'), "
                                     "move(direction='right'))"), report["reason"]
    assert report["stages"]["levels"]["validator_refuted"]["level_01.yaml"]["witness"] == [
        {"action": "move", "params": {"direction": "right"}}] * 3


def test_generated_levels_reach_the_validator_and_the_level_files_as_the_generator_made_them(tmp_path):
    """Integer dict keys and tuples survive: the validator runs in the worker that generated the level
    (no JSON round trip turning keys into strings), and --write-levels writes integer keys."""
    env = write_env(tmp_path / "typed", replace={
        "env_generate.py": ENV_GENERATE.replace("def generate_level(", "def _corridor(") + (
            "\n\ndef generate_level(seed, config):\n"
            "    return {**_corridor(seed, config), 'marks': {1: 'start', 2: (0, 1)}}\n"),
        "env_validator.py": ("    issues = []", "    issues = []\n"
                             "    if 'marks' in state and not all(isinstance(k, int) for k in state['marks']):\n"
                             "        issues.append(f\"marks: expected integer keys, found {list(state['marks'])}\")")})
    result = verify(env, "--json", "--stages", "levels", "--write-levels")
    report = json.loads(result.stdout)
    assert result.returncode == 0, report["reason"]
    assert report["stages"]["levels"]["rejected_by_validator"] == 0
    written = yaml.safe_load((env / "levels" / "level_01.yaml").read_text())
    assert written["marks"] == {1: "start", 2: [0, 1]}


def test_a_validators_warning_lines_on_a_level_are_warnings_not_a_rejection(tmp_path):
    """AutoEnv validators return (len(issues) == 0, issues) with "WARNING: ..." lines among the issues."""
    env = write_env(tmp_path / "warns", replace={"env_validator.py": (
        "    return (not issues, issues)",
        "    issues.append('WARNING: Goal is close to the start - may be easy')\n    return (not issues, issues)")})
    result = verify(env, "--json", "--stages", "levels")
    report = json.loads(result.stdout)
    assert result.returncode == 0, report["reason"]
    levels = report["stages"]["levels"]
    assert levels["rejected_by_validator"] == 0 and levels["generated_kept"] == 15
    assert levels["validator_warnings"]["level_01.yaml"] == ["WARNING: Goal is close to the start - may be easy"]


PASSWORD_ENV = '''
from pipeline.runtime import SkinEnv


class Password(SkinEnv):
    def transition(self, action):
        params = action.get("params") or {}
        self._state["said"] = params.get("word") if action.get("action") == "say" else None
        return self._state

    def reward(self, action):
        return (1.0, ["opened"], {}) if self._state.get("said") == self._state["secret_word"] else (0.0, [], {})

    def done(self, state=None):
        return self._state.get("said") == self._state["secret_word"] or self._t >= self.max_steps

    def render_skin(self, omega):
        return f"step {omega['t']}: a door asks for the word"
'''



def _password_env(tmp_path, replace: dict):
    """`say(word)` whose word has no domain but each level's `secret_word`; three levels."""
    config = json.loads(json.dumps(CONFIG))
    config["transition"]["actions"] = [{"name": "say", "description": "Say a word.", "params": ["word"]}]
    config["state_template"] = {"secret_word": "amber", "said": None}
    config["termination"] = {"max_steps": 4}
    config["observation"]["expose"] = ["said", "t"]
    levels = {f"levels/level_0{i + 1}.yaml": {"secret_word": w, "said": None}
              for i, w in enumerate(["amber", "birch", "cedar"])}
    return write_env(tmp_path / "password", config=config, levels=levels,
                     replace={"env_main.py": PASSWORD_ENV, **replace})


def test_untyped_parameter_values_come_from_the_level_the_search_plays(tmp_path):
    """`say(word)` with no domain anywhere but the level (`secret_word: amber`): the planner's
    candidates are the one action space on the level's state, so it says the level's word, scores
    the max, and reliability measures the reward instead of calling itself inconclusive."""
    generator = "def generate_level(seed, config):\n    return {'secret_word': 'word%d' % seed, 'said': None}\n"
    env = _password_env(tmp_path, {"env_generate.py": generator,
                                   "env_validator.py": "def validate_level(state):\n    return True, []\n"})
    report = json.loads(verify(env, "--json").stdout)
    assert report["accepted"] is True, report["reason"]
    assert "(reliability: planner 1.000 vs random 0.000 of the max" in report["reason"], report["reason"]
    reliability = report["stages"]["reliability"]
    assert (reliability["planner_normalized"], reliability["random_normalized"]) == (1.0, 0.0)

    out = tmp_path / "eval"
    result = envforge("evaluate", env, "--agent", "planner", "--runs", "1", "--out", out, "--json")
    assert result.returncode == 0, result.stderr
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [(e["total_reward"], e["steps"]) for e in episodes] == [(1.0, 1)] * 3  # says each level's word at once


def test_reskins_identity_search_takes_untyped_parameter_values_from_the_level_too(tmp_path):
    """The same password env: reskin's identity check plays its planner's witness (the level's word,
    found through planner.candidates) besides its random sequences, on every level."""
    import re

    env = _password_env(tmp_path, {})
    (env / "skins").mkdir()
    (env / "skins" / "loud.py").write_text("def render(omega, env):\n    return env.base_render(omega).upper()\n")
    result = envforge("reskin", env, "--check", "loud")
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"dynamics identical on (\d+) levels \((\d+) action sequences", result.stdout)
    assert found, result.stdout
    levels_played, sequences = map(int, found.groups())
    assert sequences == 3 * levels_played  # a planner witness and the two random sequences on each level


def test_shipped_val_levels_equal_to_test_levels_are_rejected_and_duplicates_warned(tmp_path):
    same = {"pos": 0, "goal": 3, "length": 6}
    overlap = write_env(tmp_path / "overlap", levels={"levels/level_01.yaml": same,
                                                       "levels/level_02.yaml": {"pos": 7, "goal": 2, "length": 8},
                                                       "val_levels/level_03.yaml": same})
    result = verify(overlap, "--json", "--stages", "levels")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["stage"] == "levels"
    assert report["reason"] == ("val_levels: expected validation levels apart from the test levels, found 1 identical "
                                "to a test level (val_levels/level_03.yaml = levels/level_01.yaml); 2 distinct of 3 "
                                "shipped level(s)")

    twice = write_env(tmp_path / "twice", levels={"levels/level_01.yaml": same, "levels/level_02.yaml": same,
                                                  "val_levels/level_03.yaml": {"pos": 7, "goal": 2, "length": 8}})
    report = json.loads(verify(twice, "--json", "--stages", "levels").stdout)
    assert report["accepted"] is True, report["reason"]
    assert ("levels: expected distinct shipped levels, found 1 duplicate(s) (levels/level_02.yaml = "
            "levels/level_01.yaml); 2 distinct of 3") in report["reason"]
    assert report["stages"]["levels"]["shipped_duplicates"] == {"levels/level_02.yaml": "levels/level_01.yaml"}


def test_max_rewards_are_written_without_float_noise(tmp_path):
    """0.1 for each move that reaches a new cell: sums like 0.1 + 0.1 + 0.1 are 0.3 in every figure and file."""
    tenths = ENV_MAIN.replace("return (1.0, [\"goal\"], {}) if reached else (0.0, [], {})",
                              "return (0.1, [\"moved\"], {})")
    env = write_env(tmp_path / "tenths", replace={"env_main.py": tenths,
                                                   "env_validator.py": ("return 1.0", "return None")})
    result = verify(env, "--json", "--stages", "execution,levels", "--write")
    report = json.loads(result.stdout)
    entries = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    for value in list(report["stages"]["levels"]["max_rewards"].values()) + [e["max_reward"] for e in entries.values()]:
        assert value == round(value, 9) and len(repr(value)) <= 6, value


def test_a_verdict_names_the_levels_whose_max_is_unknown(tmp_path):
    """A 3-node search finds no reward on some levels: their max is unknown, and the verdict says which."""
    env = write_env(tmp_path / "corridor")
    report = json.loads(verify(env, "--json", "--stages", "execution,levels", "--search-nodes", "3").stdout)
    unknown = report["stages"]["levels"]["unknown_maxima"]
    assert unknown and all(v.startswith("max reward unknown (the search found no reward") for v in unknown.values())
    assert (f"{len(unknown)} level(s) with an unknown or zero max reward, left out of normalized scores: "
            f"{next(iter(unknown))} (max reward unknown") in report["reason"]


def test_a_stochastic_env_gets_expectation_estimates_not_certified_maxima(tmp_path):
    """A move succeeds with probability 0.7 (the global RNG, drawn in step): verify says the env draws
    random numbers during step, and each level file's max is the witness's mean over seeds with a
    95% interval, labelled an estimate."""
    chancy = ENV_MAIN.replace(
        "from pipeline.runtime import SkinEnv", "import random\n\nfrom pipeline.runtime import SkinEnv"
    ).replace(
        'step = 1 if params["direction"] == "right" else -1',
        'step = (1 if params["direction"] == "right" else -1) if random.random() < 0.7 else 0',
    )
    env = write_env(tmp_path / "chancy", replace={"env_main.py": chancy})
    result = verify(env, "--json", "--stages", "levels", "--write")
    report = json.loads(result.stdout)
    levels = report["stages"]["levels"]
    assert levels["stochastic"]["step"] == 1 and levels["stochastic"]["level"] == "levels/level_01.yaml"
    assert "the environment draws random numbers during step (first at step 1 (move(" in report["reason"]
    entries = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    for key, entry in entries.items():
        assert entry["certainty"] == "estimate" and entry["calculation_method"] == "expectation_estimate", entry
        low, high = entry["expectation"]["ci95"]
        assert (
            low <= entry["max_reward"] == entry["expectation"]["mean"] == max(entry["expectation"]["tried"].values())
            <= high
        )
        assert entry["expectation"]["seeds"] == (
            entry["expectation"]["replanning"]["seeds"] if entry["expectation"]["policy"] == "the replanning agent"
            else 10
        )
        assert 0 < entry["max_reward"] <= 1 and entry["notes"].startswith("stochastic: expectation estimate")
        assert levels["expectation_estimates"][key] == entry["expectation"]


def _standing(tmp_path, claims: dict, maxima: dict) -> dict:
    """max_reward_standing of shipped claims `maxima` beside a verification.json whose levels stage
    compared them as `claims` (None: no verification.json; a string: the file's text)."""
    from envforge.pipeline.envfolder.spec import Reader, claim_checks, max_reward_standing
    from envforge.pipeline.records import dumps

    if claims is not None:
        (tmp_path / "verification.json").write_text(claims if isinstance(claims, str) else dumps("verification", {
            "accepted": True, "stage": "", "reason": "accepted", "stages": {"levels": {"claims": claims}}}))
    return max_reward_standing({"levels": {k: {"max_reward": v} for k, v in maxima.items()}}, maxima,
                               claim_checks(Reader(tmp_path), "verification.json"))


def test_a_claim_verify_reached_but_did_not_prove_divides_scores_with_a_note(tmp_path):
    """A shipped claim that a witness scores is a lower bound unless a proof backs it: it divides
    normalized scores, noted as not proved; one equal to a proved max divides with no note. A
    verification.json an earlier envforge wrote called both "confirmed": one not `exact` is reached."""
    reached = "is reached by envforge verify's search, not proved: a lower bound"
    standing = _standing(tmp_path, {
        "level_01.yaml": {"claimed": 1.2, "found": 1.2, "exhaustive": False, "exact": False, "status": "reached"},
        "level_02.yaml": {"claimed": 1.0, "found": 1.0, "exhaustive": True, "exact": True, "status": "confirmed"},
        "level_03.yaml": {"claimed": 1.2, "found": 1.2, "exhaustive": False, "exact": False, "status": "confirmed"},
        "level_04.yaml": {"claimed": 2.0, "found": 2.0, "exhaustive": False, "status": "confirmed"}},
        {"level_01.yaml": 1.2, "level_02.yaml": 1.0, "level_03.yaml": 1.2, "level_04.yaml": 2.0})
    assert standing == {"level_01.yaml": (True, f"the claimed max reward of level_01.yaml (1.2) {reached}"),
                        "level_03.yaml": (True, f"the claimed max reward of level_03.yaml (1.2) {reached}"),
                        "level_04.yaml": (True, f"the claimed max reward of level_04.yaml (2) {reached}")}


def test_one_comparison_that_does_not_read_leaves_only_its_level_unchecked(tmp_path):
    """A forged or broken entry in verification.json's claims never voids the other levels' verdicts
    (a claim found beaten stays out of normalized scores); its own level is noted unchecked, and so
    is a status this envforge does not know, and every claim when the file does not read at all."""
    beaten = {"claimed": 1.0, "found": 2.0, "exhaustive": False, "exact": False, "status": "beaten"}
    standing = _standing(tmp_path, {
        "level_01.yaml": beaten, "level_02.yaml": {"claimed": 1.0, "found": None, "status": "confirmed"},
        "level_03.yaml": {"claimed": 1.0, "found": 1.0, "status": "estimated"}},
        {"level_01.yaml": 1.0, "level_02.yaml": 1.0, "level_03.yaml": 1.0})
    assert standing["level_01.yaml"] == (False, "the claimed max reward of level_01.yaml (1) is beaten: envforge "
                                                "verify scored 2.0; left out of normalized scores")
    assert standing["level_02.yaml"][0] is True and standing["level_02.yaml"][1].startswith(
        "the claimed max reward of level_02.yaml (1) is not checked: verification.json's comparison does not read (")
    assert standing["level_02.yaml"][1].endswith(
        "/verification.json: stages.levels.claims.level_02.yaml: found: expected a finite number, found null)")
    assert standing["level_03.yaml"] == (True, "the claimed max reward of level_03.yaml (1) is not checked: "
                                               "verification.json calls it 'estimated', which this envforge does "
                                               "not know")
    unread = _standing(tmp_path, "{not json", {"level_01.yaml": 1.0})
    assert unread["level_01.yaml"][0] is True
    assert unread["level_01.yaml"][1].startswith("the claimed max reward of level_01.yaml (1) is not checked: "
                                                 "verification.json's comparison does not read (")
