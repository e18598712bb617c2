"""Why verify rejected, as a program reads it: every rejection carries a typed cause
(pipeline/verify/causes.py), `envforge verify --json` and verification.json record it as
{"kind": ..., fields}, and it reads back as its shape."""
from __future__ import annotations

import ast
import json
import shutil
import types
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_kit import envforge

from envforge.pipeline import kinds, layout, records
from envforge.pipeline.kinds import (
    DegeneratePolicy,
    EndConditionIgnored,
    EnvCrashed,
    GeneratorAndShippedLevelsFail,
    GeneratorIgnoresSeed,
    InvalidPlayPays,
    RejectionCause,
    SafetyStop,
    UnknownCause,
    UnreadableFolder,
    ValTestOverlap,
    Verification,
)
from envforge.pipeline.testing.tiny_env import write_env

ROOT = Path(__file__).resolve().parent.parent
AUTOENV_DEV = Path("/work/shared/autoenv-dev")


def _rejections_without_cause() -> list[str]:
    files = sorted((ROOT / "pipeline" / "verify").rglob("*.py")) + [ROOT / "pipeline" / "levelmax.py"]
    missing = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                    getattr(node.exc.func, "id", None) == "Rejected" and \
                    not any(k.arg == "cause" for k in node.exc.keywords):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return missing


def test_every_rejection_verify_raises_names_its_cause():
    assert _rejections_without_cause() == []


def _example(cls: type) -> RejectionCause:
    """An instance of a cause kind with a value of its type in every field."""
    values = {}
    for name, hint in typing.get_type_hints(cls).items():
        if name.isupper() or typing.get_origin(hint) is typing.ClassVar:
            continue
        if isinstance(hint, types.UnionType):  # X | None: an X
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        base = typing.get_origin(hint) or hint
        if name in getattr(cls, "CHOICES", {}):  # a field with a fixed set of values: the first
            values[name] = cls.CHOICES[name][0]
            continue
        if base is RejectionCause:  # a cause made of causes: each part its own kind
            values[name] = SafetyStop(f"{name} detail")
            continue
        values[name] = {str: f"{name} text", int: 3, float: 0.93, bool: True, dict: {"action": "RESEARCH"},
                        list: []}[base]
    return cls(**values)


def test_every_cause_kind_is_recorded_in_verification_json_and_reads_back_as_its_shape(tmp_path):
    kinds_seen = set()
    known = [cls for cls in RejectionCause.__subclasses__() if cls is not UnknownCause]
    for cls in known:
        cause = _example(cls)
        path = tmp_path / layout.VERIFICATION
        records.write(path, Verification(False, "reliability", "why, for a person", cause=cause))
        written = json.loads(path.read_text())
        assert written["cause"]["kind"] == cls.TAG_VALUE and written["format"] == "envforge.verification/1"
        read = records.read(path, Verification)
        assert type(read.cause) is cls and read.cause == cause
        kinds_seen.add(cls.TAG_VALUE)
    assert len(kinds_seen) == len(known) >= 26  # one kind each, none shared
    # a kind a newer envforge wrote reads as an unknown cause, kept as written: the record still reads
    written["cause"] = {"kind": "no_such_kind", "x": 1}
    path.write_text(json.dumps(written))
    read = records.read(path, Verification)
    assert read.cause == UnknownCause("no_such_kind", {"x": 1}) and read.to_dict()["cause"] == written["cause"]
    written["cause"] = "not an object"
    path.write_text(json.dumps(written))
    with pytest.raises(kinds.RecordError, match=r"cause: expected a JSON object"):
        records.read(path, Verification)


def _rejected(env: Path, stage: str, *flags: str) -> tuple[dict, Verification]:
    result = envforge("verify", env, "--json", "--write", *flags)
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["stage"] == stage, report["reason"]
    return report, records.read(env / layout.VERIFICATION, Verification)


def _execution_rejected(folder: Path, old: str, new: str) -> tuple[dict, RejectionCause]:
    """verify --stages execution on the corridor with `old` in env_main.py replaced by `new`: its
    report, and the cause verification.json records."""
    env = write_env(folder, replace={"env_main.py": (old, new)})
    report, recorded = _rejected(env, "execution", "--stages", "execution")
    return report, recorded.cause


def test_an_env_whose_done_stays_false_on_its_goal_is_rejected_naming_the_condition_and_step(tmp_path):
    report, cause = _execution_rejected(
        tmp_path / "e", 'return self._state["pos"] == self._state["goal"] or self._t >= self.max_steps',
        "return self._t >= self.max_steps")
    assert isinstance(cause, EndConditionIgnored)
    assert (cause.condition, cause.text, cause.level) == ("termination.conditions[0]", "pos == goal",
                                                          "levels/level_01.yaml")
    assert 1 <= cause.step < 12 and cause.action.startswith("move(direction=")
    assert f"after step {cause.step} ({cause.action})" in report["reason"]
    assert report["cause"] == cause.to_dict() | {"kind": "end_condition_ignored"}


def test_an_env_that_crashes_on_a_step_is_rejected_with_the_failure_step_and_action(tmp_path):
    report, cause = _execution_rejected(tmp_path / "e", 'step = 1 if params["direction"] == "right" else -1',
                                        'step = 1 if params["direction"] == "right" else -1 // 0')
    assert isinstance(cause, EnvCrashed)
    assert (cause.failure, cause.where, cause.activity, cause.level, cause.action) == (
        "exception", "env_main.py:8", "random episode 1", "levels/level_01.yaml", "move(direction='left')")
    assert cause.step >= 1 and f"on step {cause.step}, move(direction='left')" in report["reason"]


def test_an_unreadable_folder_is_rejected_naming_the_file(tmp_path):
    env = write_env(tmp_path / "e")
    (env / layout.CONFIG).write_text("meta: [unclosed\n")
    _, recorded = _rejected(env, "execution")
    assert isinstance(recorded.cause, UnreadableFolder) and recorded.cause.file == layout.CONFIG
    assert recorded.cause.line is not None or recorded.cause.path


def test_a_generator_ignoring_its_seed_is_rejected_with_the_seeds_tried_and_a_failure_of_the_shipped_levels_too(
        tmp_path):
    ignores_seed = {"env_generate.py": ("rng = random.Random(seed)", "seed = 42\n    rng = random.Random(seed)")}
    _, recorded = _rejected(write_env(tmp_path / "e", replace=ignores_seed), "levels", "--stages", "levels")
    assert recorded.cause == GeneratorIgnoresSeed(45)
    # ... and shipping a validation level equal to a test level: both causes, neither hiding the other
    same = {"pos": 0, "goal": 3, "length": 6}
    overlap = write_env(tmp_path / "both", replace=ignores_seed, levels={
        "levels/level_01.yaml": same, "levels/level_02.yaml": {"pos": 7, "goal": 2, "length": 8},
        "val_levels/level_03.yaml": same})
    report, recorded = _rejected(overlap, "levels", "--stages", "levels")
    assert recorded.cause == GeneratorAndShippedLevelsFail(
        GeneratorIgnoresSeed(45), ValTestOverlap(1, 2, 3, {"val_levels/level_03.yaml": "levels/level_01.yaml"}))
    assert report["cause"]["generator"]["kind"] == "generator_ignores_seed"
    assert report["cause"]["shipped"]["kind"] == "val_test_overlap"


def test_a_reward_one_repeated_action_earns_names_the_policy_in_the_cause(tmp_path):
    right_only = {"levels/level_01.yaml": {"pos": 0, "goal": 3, "length": 6},
                  "levels/level_02.yaml": {"pos": 0, "goal": 5, "length": 8},
                  "val_levels/level_03.yaml": {"pos": 0, "goal": 4, "length": 7}}
    report, recorded = _rejected(write_env(tmp_path / "e", levels=right_only), "reliability")
    assert recorded.cause == DegeneratePolicy("repeating move(direction='right')",
                                              {"action": "move", "params": {"direction": "right"}}, 1.0, 1.0, 0.2, 3)
    assert report["cause"]["policy"] == "repeating move(direction='right')"


def test_a_reward_for_an_action_the_env_does_not_declare_is_rejected_naming_the_policy_and_level(tmp_path):
    """Issue 38: an undeclared action name earns a 'discovery' bonus (2 a step against a max of 1).
    Search, random agent and constant policies play only declared actions: invalid play is the
    control that finds it. The sound corridor earns nothing for invalid play and is accepted."""
    discovery = {"env_main.py": ('        reached = self._state["pos"] == self._state["goal"]\n',
                                 '        if action.get("action") != "move":\n'
                                 '            return (2.0, ["discovery"], {})\n'
                                 '        reached = self._state["pos"] == self._state["goal"]\n')}
    report, recorded = _rejected(write_env(tmp_path / "e", replace=discovery), "reliability")
    cause = recorded.cause
    assert isinstance(cause, InvalidPlayPays), report["reason"]
    assert (cause.policy, cause.action, cause.max_reward) == (
        "repeating an undeclared action 'undeclared_action'", {"action": "undeclared_action", "params": {}}, 1.0)
    assert cause.total == 24.0  # 2 on each of the episode's 12 steps (termination.max_steps)
    assert f"repeating an undeclared action 'undeclared_action' scores 24 on {cause.level}" in report["reason"]
    assert report["stages"]["reliability"]["invalid_play"]["repeating an undeclared action 'undeclared_action'"] == 24

    sound = envforge("verify", write_env(tmp_path / "sound"), "--json")
    figures = json.loads(sound.stdout)["stages"]["reliability"]
    assert sound.returncode == 0 and figures["invalid_play"] and set(figures["invalid_play"].values()) == {0}
    assert "repeating move without its parameter 'direction'" in figures["invalid_play"]


def test_review_advice_reads_the_cause_not_the_wording_of_the_reason():
    from envforge.pipeline.review.advice import advise

    entry = SimpleNamespace(status="rejected", name="e", folder="out/e", run="out", by_hand=False,
                            stage="reliability", source="themes.txt", reason="reworded: no phrase review could match",
                            cause=None)
    policy = DegeneratePolicy("repeating RESEARCH", {"action": "RESEARCH"}, 0.93, 1.0, 0.2, 15)
    advice = advise(SimpleNamespace(entry=entry, cause=policy, figures=kinds.VerifyFigures()))
    assert advice.meaning == ("repeating RESEARCH until the episode ends earns 93% of the max (the search planner "
                              "100%): the reward does not measure skill")


@pytest.mark.slow
@pytest.mark.skipif(not AUTOENV_DEV.is_dir(), reason="the AutoEnv development environments are not on this machine")
def test_1_interdimension_is_rejected_at_reliability_naming_the_repeated_research(tmp_path):
    """AutoEnv's 1_InterDimension pays for repeating RESEARCH: verification.json names that policy in
    a typed field (on two of its shipped levels, a small search budget: the verdict is the same)."""
    env = shutil.copytree(AUTOENV_DEV / "1_InterDimension", tmp_path / "inter")
    for level in [*sorted((env / "levels").glob("*.yaml"))[2:], *(env / "val_levels").glob("*.yaml")]:
        level.unlink()
    report, recorded = _rejected(env, "reliability", "--stages", "reliability", "--search-nodes", "300",
                                 "--random-episodes", "1")
    cause = recorded.cause
    assert isinstance(cause, DegeneratePolicy)
    assert (cause.policy, cause.action, cause.levels) == ("repeating RESEARCH", {"action": "RESEARCH", "params": {}}, 2)
    assert cause.normalized >= cause.planner_normalized - cause.margin
    assert report["cause"]["kind"] == "degenerate_policy" and report["cause"]["policy"] == "repeating RESEARCH"
