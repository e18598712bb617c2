"""Typed records (pipeline/kinds.py): one model per record kind, read back as that model; a body
that does not fit is refused naming the file and the field; the manifest is changed only through
its typed operations; level_max_rewards.json has one builder; the run database's unwritten
`artifacts` table is gone, and a database of the earlier schema still opens."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import envforge

from envforge.pipeline import kinds, layout, manifest, records
from envforge.pipeline.kinds import (
    EnvOrigin,
    EpisodeRecord,
    Generated,
    HumanReview,
    IterationLevels,
    LearnedAgent,
    LevelMaxEntry,
    LevelMaxRewards,
    Manifest,
    PoolRecord,
    RecordError,
    Skin,
    TrainingLevel,
    VerificationSummary,
)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "generated_envs" / "reference"


def _episode(**changes) -> EpisodeRecord:
    fields = dict(env="crate_dock", level="levels/level_01.yaml", run=0, agent="random", model="-", split="test",
                  stop_reason="done", total_reward=1, max_reward=1.0, steps=3, env_steps=3, valid_actions=3,
                  invalid_actions=0, format_errors=0, action_validity_rate=1.0, invalid_action_rate=0.0,
                  error_streaks=0, recovered_streaks=0, recovery_rate=None, distinct_states=3, model_calls=0,
                  retries=0, tokens_in=0, tokens_out=0, dollars=0.0, wall_seconds=0.5)
    return EpisodeRecord.scored(**{**fields, **changes})


def test_every_kind_maps_to_its_model_and_a_typed_record_reads_back_as_that_model(tmp_path):
    assert all(model.KIND == kind and issubclass(model, kinds.Record) for kind, model in records.KINDS.items())
    assert {"manifest", "level_max_rewards", "episode", "pool", "training_levels", "learned_agent"} <= set(
        records.KINDS
    )
    written = {
        "learned.json": LearnedAgent("crate_dock", "prompt", "c3", ["c0", "c3"], 2, "replay-model", False, 0.5, None),
        "pool.json": PoolRecord("crate_dock", "prompt", 2, {"act": 4}, "c3", "", [{"id": "c0"}]),
        "iteration_01.json": IterationLevels("crate_dock", 1, [TrainingLevel("seed:101000", 101000, "ab", 1.0,
                                                                              "search_witness")]),
    }
    for name, record in written.items():
        records.write(tmp_path / name, record)
        data = json.loads((tmp_path / name).read_text())
        assert data["format"] == f"envforge.{record.KIND}/1" and data["envforge"]
        back = records.read(tmp_path / name, type(record))
        assert back == record and type(back) is type(record)
    assert records.read(tmp_path / "absent.json", LearnedAgent) is None
    records.append(tmp_path / "episodes.jsonl", _episode())
    records.append(tmp_path / "episodes.jsonl", _episode(run=1, total_reward=0.25))
    read = [r for _, r in records.lines(tmp_path / "episodes.jsonl", EpisodeRecord)]
    assert [(r.run, r.total_reward, r.normalized) for r in read] == [(0, 1.0, 1.0), (1, 0.25, 0.25)]
    assert isinstance(read[0].total_reward, float)


def test_a_record_whose_field_does_not_fit_its_model_is_refused_naming_the_file_and_the_field(tmp_path):
    path = tmp_path / "pool.json"
    records.write(path, PoolRecord("crate_dock", "prompt"))
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "iterations_done": "two"}))
    with pytest.raises(RecordError, match=rf"{path}: iterations_done: expected an integer, found a string"):
        records.read(path, PoolRecord)
    path.write_text(json.dumps({**data, "final": 3}))
    with pytest.raises(RecordError, match=rf"{path}: final: expected a string or null, found an integer \(3\)"):
        records.read(path, PoolRecord)
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "method"}))
    with pytest.raises(RecordError, match=rf"{path}: expected the fields of envforge.pool/1, found no method"):
        records.read(path, PoolRecord)
    levels = tmp_path / "iteration_00.json"
    records.write(levels, IterationLevels("crate_dock", 0, [TrainingLevel("seed:1", 1, "ab", 1.0, "search")]))
    data = json.loads(levels.read_text())
    data["levels"][0]["max_reward"] = True
    levels.write_text(json.dumps(data))
    with pytest.raises(RecordError, match=r"levels\[0\]: max_reward: expected a finite number, found a boolean"):
        records.read(levels, IterationLevels)


def test_a_shipped_level_max_rewards_file_reads_as_its_model_and_keeps_its_own_fields(tmp_path):
    """AutoEnv's C.1 shape, with what its authors added (breakdowns, a bare number per level)."""
    shipped = {"environment_id": "4_MagneticField", "calculation_timestamp": "2025-09-01 10:00:00",
               "reward_structure": {"correct": 1.2},
               "levels": {"level_01.yaml": {"max_reward": 1.2, "calculation_method": "binary_reward_analysis",
                                            "encoded_message": "D0C7", "notes": "submit D0C7"},
                          "level_02.yaml": 1.2},
               "summary": {"total_levels": 2, "average_max_reward": 1.2}}
    path = tmp_path / layout.LEVEL_MAX_REWARDS
    path.write_text(json.dumps(shipped))
    data = records.read(path, LevelMaxRewards)
    assert data.levels["level_01.yaml"].max_reward == 1.2 and data.levels["level_02.yaml"].max_reward == 1.2
    assert data.levels["level_01.yaml"].extra == {"encoded_message": "D0C7"}
    assert data.extra == {"reward_structure": {"correct": 1.2}}
    records.write(path, data)
    again = json.loads(path.read_text())
    assert again["reward_structure"] == {"correct": 1.2}
    assert again["levels"]["level_01.yaml"] == shipped["levels"]["level_01.yaml"]
    assert again["levels"]["level_02.yaml"] == {"max_reward": 1.2}
    shipped["levels"]["level_02.yaml"] = {"max_reward": "1.2"}
    path.write_text(json.dumps(shipped))
    with pytest.raises(
        RecordError, match=r"levels\.level_02\.yaml: max_reward: expected a finite number, found a string"
    ):
        records.read(path, LevelMaxRewards)


def test_the_one_level_max_rewards_builder_computes_its_summary_from_the_entries():
    built = LevelMaxRewards.build("tide_pool", {"level_01.yaml": LevelMaxEntry(5.0, "search_witness", "exact"),
                                                "level_02.yaml": LevelMaxEntry(6.0, "search_witness", "exact"),
                                                "level_03.yaml": LevelMaxEntry(6.0, "validator_analytic")},
                                  "how it was found", corrected_levels=1)
    assert built.summary == {"total_levels": 3, "average_max_reward": 5.6667, "min_max_reward": 5.0,
                             "max_max_reward": 6.0, "corrected_levels": 1, "methodology": "how it was found"}
    assert "notes" not in built.to_dict()["levels"]["level_03.yaml"]  # a field never set is not written
    assert built.calculation_timestamp


def test_the_manifest_operations_change_their_part_and_keep_the_rest(tmp_path):
    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    data = json.loads((env / layout.MANIFEST).read_text())
    (env / layout.MANIFEST).write_text(json.dumps({**data, "curator": "someone", "human_review": {
        "decision": "accepted", "reason": "a model wrote this", "at": "now"}}))
    manifest.packaged(env, EnvOrigin("crate_dock", "push crates", {"genre": "puzzle"}, "envforge generate"),
                      Generated.of("m", 3, {"code": {"usd": 0.25}, "dsl": {"usd": 0.5}}), None)
    written = json.loads((env / layout.MANIFEST).read_text())
    assert "human_review" not in written  # the pipeline's verdict carries no decision a model wrote
    assert written["curator"] == "someone" and written["cost_usd"] == 0.75 and written["seed"] == 3
    assert list(written)[:11] == ["format", "envforge", "name", "theme", "tags", "origin", "model", "seed",
                                  "generated_at", "stages", "cost_usd"]  # EnvOrigin's fields, then Generated's
    assert written["files"][layout.ENV_MAIN] and layout.MANIFEST not in written["files"]
    manifest.decided(env, HumanReview("rejected", "too easy", "2026-11-26 20:00:00", "accepted"))
    manifest.verified(env, VerificationSummary(True, None, "accepted", "2026-11-26", "landlock"), None)
    manifest.list_skin(env, "radio", Skin("terse", "skins/radio.py", "00" * 32, {"levels": 2}))
    read = manifest.read(env)
    assert read.human_review == HumanReview("rejected", "too easy", "2026-11-26 20:00:00", "accepted")
    assert read.verification.accepted and read.confinement == "landlock" and read.skins["radio"].style == "terse"
    assert read.theme == "push crates" and read.extra == {"curator": "someone"}
    manifest.unlist_skin(env, "radio")
    assert "radio" not in manifest.read(env).skins and manifest.read(env).human_review.decision == "rejected"


def test_a_damaged_manifest_is_rebuilt_and_one_from_a_newer_envforge_is_refused(tmp_path):
    env = shutil.copytree(REFERENCE / "tide_pool", tmp_path / "tide_pool")
    (env / layout.MANIFEST).write_text(json.dumps({"name": "tide_pool", "seed": "not a number"}))
    assert manifest.read(env) == Manifest(name="tide_pool")
    (env / layout.MANIFEST).write_text("{not json")
    manifest.reference(env, "a tide pool", {"genre": "explore"})
    assert manifest.read(env).theme == "a tide pool" and manifest.read(env).origin == "hand-written reference"
    (env / layout.MANIFEST).write_text(json.dumps({"format": "envforge.manifest/9", "envforge": "9.0"}))
    with pytest.raises(RecordError, match="format envforge.manifest/9 .written by envforge 9.0. is not one this"):
        manifest.read(env)


def test_a_run_database_of_the_earlier_schema_opens_without_its_unwritten_artifacts_table(tmp_path):
    from envforge.pipeline.generate.rundb import RunDB

    path = tmp_path / layout.RUN_DB
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE runs (id INTEGER PRIMARY KEY, started REAL, finished REAL, status TEXT, args TEXT, summary TEXT);
        CREATE TABLE themes (name TEXT PRIMARY KEY, theme TEXT, source TEXT, status TEXT, stage TEXT, reason TEXT,
                             run_id INTEGER, updated REAL);
        CREATE TABLE stage_attempts (id INTEGER PRIMARY KEY, run_id INTEGER, theme TEXT, stage TEXT, started REAL,
            ended REAL, status TEXT, error TEXT, input_tokens INTEGER, output_tokens INTEGER, usd REAL, steps INTEGER);
        CREATE TABLE artifacts (theme TEXT, stage TEXT, path TEXT, sha256 TEXT, PRIMARY KEY (theme, stage, path));
        INSERT INTO themes (name, theme, source, status, stage, reason) VALUES
            ('dock', 'push crates', 'themes.txt:1', 'accepted', 'package', '');
        PRAGMA user_version = 1;
    """)
    old.close()
    db = RunDB(path)
    assert db.themes()[0]["name"] == "dock" and db.themes()[0]["status"] == "accepted"
    db.close()
    check = sqlite3.connect(path)
    tables = {row[0] for row in check.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "artifacts" not in tables and {"runs", "themes", "stage_attempts"} <= tables
    assert check.execute("PRAGMA user_version").fetchone()[0] == records.SQLITE_SCHEMAS["run_db"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["crate_dock", "tide_pool"])
def test_rebuilding_a_reference_env_with_no_edits_rewrites_identical_files(tmp_path, name):
    """scripts/build_reference_envs.py builds the levels and level_max_rewards.json by verify's path
    (`verify --write-levels`, the one builder) and the manifest with its typed operation: on an
    unchanged env every file comes out byte for byte."""
    env = shutil.copytree(REFERENCE / name, tmp_path / name)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_reference_envs.py"), "--in-process", str(env)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    changed = [str(p.relative_to(env)) for p in sorted(env.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
               and p.read_bytes() != (REFERENCE / name / p.relative_to(env)).read_bytes()]
    assert changed == []


def test_a_call_journal_line_that_does_not_fit_is_refused_by_the_run_and_left_out_by_review(tmp_path):
    from envforge.pipeline.generate.journal import JournaledClient
    from envforge.pipeline.review.catalog import model_calls

    journal = tmp_path / layout.CALL_JOURNAL
    records.append(journal, kinds.ModelCall("design", 1, {"text": "# Design", "model": "m1"}))
    records.append_jsonl(journal, "model_call", {"stage": "dsl", "index": "first", "response": {}})
    with pytest.raises(RecordError, match=rf"{journal}:2: index: expected an integer, found a string"):
        JournaledClient(None, journal, "theme")
    assert [(c.stage, c.index, c.response["model"]) for c in model_calls(tmp_path)] == [("design", 1, "m1")]


# verification.json figures as an envforge before `exact` and `why` wrote them (claims: level -> a dict)
OLD_FIGURES = {
    "levels": {"claims": {"level_01.yaml": {"claimed": 5, "found": 7.5, "exhaustive": False, "status": "beaten"}}},
    "reliability": {"levels": 2, "best_constant_policy": {"policy": "repeating WAIT", "normalized": 0.25},
                    "claims": {"level_02.yaml": {"claimed": 3.0, "found": 1.0, "exhaustive": True,
                                                 "status": "unreachable"}}},
}


def test_claims_and_the_best_constant_policy_of_an_older_verification_json_read_as_their_shapes(tmp_path):
    from envforge.pipeline.envfolder.spec import Reader, claim_checks, max_reward_standing
    from envforge.pipeline.review.details import _verification

    (tmp_path / layout.VERIFICATION).write_text(records.dumps("verification", {
        "accepted": False, "stage": "reliability", "reason": "reward: ...", "stages": OLD_FIGURES}))
    stages = records.read(tmp_path / layout.VERIFICATION, kinds.Verification).stages
    beaten = stages.levels.claims["level_01.yaml"]
    assert isinstance(beaten, kinds.ClaimCheck)
    assert (beaten.claimed, beaten.found, beaten.exhaustive, beaten.status, beaten.exact, beaten.why) == \
        (5.0, 7.5, False, "beaten", None, None)
    assert stages.reliability.best_constant_policy == kinds.ConstantPolicyScore("repeating WAIT", 0.25)
    written = stages.to_dict()  # read back as written: nothing added to a claim, nothing lost
    assert written["levels"]["claims"] == OLD_FIGURES["levels"]["claims"]
    assert written["reliability"]["claims"] == OLD_FIGURES["reliability"]["claims"]
    assert _verification(tmp_path)["stages"]["reliability"]["best_constant_policy"] == {
        "policy": "repeating WAIT", "normalized": 0.25}  # as review shows it
    # the typed claims still decide which shipped max rewards divide scores
    standing = max_reward_standing({"levels": {"level_01.yaml": {"max_reward": 5}, "level_02.yaml": {"max_reward": 3}}},
                                   {"level_01.yaml": 5.0, "level_02.yaml": 3.0},
                                   claim_checks(Reader(tmp_path), layout.VERIFICATION))
    assert standing == {
        "level_01.yaml": (False, "the claimed max reward of level_01.yaml (5) is beaten: envforge verify scored 7.5; "
                                 "left out of normalized scores"),
        "level_02.yaml": (False, "the claimed max reward of level_02.yaml (3) is unreachable: an exhaustive search "
                                 "scores only 1.0; left out of normalized scores")}


def test_claims_verify_compares_read_back_as_written_and_one_that_does_not_fit_is_refused_naming_it():
    from types import SimpleNamespace

    from envforge.pipeline.verify import claims

    found = [SimpleNamespace(source="levels/level_01.yaml", best_seen=2.0, exact=True, search_exhaustive=False,
                             upper_bound=None),
             SimpleNamespace(source="levels/level_02.yaml", best_seen=1.0, exact=False, search_exhaustive=False,
                             upper_bound=2.0)]
    compared = claims.compare({"level_01": 3.0, "level_02": 4.0}, found)  # as read_claims keys them
    figures = kinds.VerifyFigures(levels=kinds.LevelsFigures(claims=compared))
    assert figures.to_dict()["levels"]["claims"] == {
        "level_01.yaml": {"claimed": 3.0, "found": 2.0, "exhaustive": False, "exact": True, "status": "unreachable",
                          "why": "the proved max is 2"},
        "level_02.yaml": {"claimed": 4.0, "found": 1.0, "exhaustive": False, "exact": False, "status": "unreachable",
                          "why": "the DSL's reward bound is 2"}}
    assert kinds.VerifyFigures.from_dict(json.loads(json.dumps(figures.to_dict()))) == figures
    assert claims.summary(compared) == ("2 unreachable; flagged: level_01.yaml claims 3, the proved max is 2; "
                                        "level_02.yaml claims 4, the DSL's reward bound is 2")
    another_tools = {"claimed": 1.0, "found": 1.0, "status": "confirmed", "checked_by": "other-tool"}
    kept = kinds.VerifyFigures.from_dict({"levels": {"claims": {"level_03.yaml": another_tools}}})
    assert kept.levels.claims["level_03.yaml"].exhaustive is None
    assert kept.to_dict()["levels"]["claims"]["level_03.yaml"] == another_tools  # its own field kept
    with pytest.raises(RecordError, match=r"claims\.level_03\.yaml: expected the fields of ClaimCheck, found no "
                                          r"status"):
        kinds.VerifyFigures.from_dict({"levels": {"claims": {"level_03.yaml": {"claimed": 1.0, "found": 1.0}}}},
                                      "verification.json: stages")


# The coding agent's log as envforge 0.1.0 wrote it before its lines named their shape: a reply, a tool
# result, a reply whose second call was dropped and one with no text, then the repair stage's first step.
OLD_TRAJECTORY = [
    {"stage": "code", "step": 1, "text": "the rules first",
     "tool_calls": [{"name": "write_file", "arguments": {"path": "env_main.py", "content": "a\nb\n"}}]},
    {"stage": "code", "step": 1, "tool": "write_file", "error": False, "result": "wrote env_main.py"},
    {"stage": "code", "step": 2, "text": "now check",
     "tool_calls": [{"name": "run_check", "arguments": {}}], "dropped_tool_calls": 1},
    {"stage": "code", "step": 2, "tool": "run_check", "error": False,
     "result": "check failed: 1 error(s), 0 warning(s).\nerror: env_main.py: KeyError"},
    {"stage": "code", "step": 3, "tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]},
    {"stage": "code", "step": 3, "tool": "finish", "error": True, "result": "the check fails"},
    {"stage": "repair", "step": 1, "text": "fix", "tool_calls": []},
]


def test_the_coding_agent_s_log_of_an_earlier_envforge_reads_back_as_replies_and_tool_results(tmp_path):
    """trajectory.jsonl lines are a reply (CodingReply) or a tool result (CodingToolResult), each with
    the fields it always has; a line written before they named their shape reads as the shape its
    fields make it, and review's history of it is what it was."""
    from envforge.pipeline.review.history import agent_attempts

    old = tmp_path / "old" / layout.TRAJECTORY
    old.parent.mkdir()
    old.write_text("".join(json.dumps({"format": "envforge.coding_step/1", "envforge": "0.1.0", **line}) + "\n"
                           for line in OLD_TRAJECTORY))
    read = [entry for _, entry in records.lines(old, kinds.CodingStep)]
    assert [type(e).__name__ for e in read] == ["CodingReply", "CodingToolResult"] * 3 + ["CodingReply"]
    assert (read[2].text, read[2].dropped_tool_calls, read[4].text, read[4].tool_calls[0]["name"]) == \
        ("now check", 1, None, "finish")
    assert (read[5].tool, read[5].error, read[5].result) == ("finish", True, "the check fails")

    new = tmp_path / "new" / layout.TRAJECTORY
    new.parent.mkdir()
    for entry in read:
        records.append(new, entry)
    written = [json.loads(line) for line in new.read_text().splitlines()]
    assert [w["type"] for w in written] == ["reply", "tool_result"] * 3 + ["reply"]
    assert [{k: v for k, v in w.items() if k not in ("format", "envforge", "type")} for w in written] == \
        OLD_TRAJECTORY  # the same facts, each line now naming its shape
    assert [entry for _, entry in records.lines(new, kinds.CodingStep)] == read

    for log in (old, new):
        code, repair = agent_attempts(log)
        assert (code.stage, code.number, [s.number for s in code.steps]) == ("code", 1, [1, 2, 3])
        assert (repair.stage, repair.number, [s.text for s in repair.steps]) == ("repair", 1, ["fix"])
        assert code.changed == ["env_main.py"]
        assert code.checks == ["failed: 1 error(s), 0 warning(s); first: env_main.py: KeyError"]
        assert [(t.name, t.error, t.result) for t in code.steps[2].tools] == [("finish", True, "the check fails")]

    # untagged, a tool result by its `tool`: its missing `error` is named
    records.append_jsonl(new, "coding_step", {"stage": "code", "step": 4, "tool": "run_check", "result": "ok"})
    with pytest.raises(RecordError, match=rf"{new}:8: expected the fields of envforge.coding_step/1, found no error"):
        list(records.lines(new, kinds.CodingStep))
    records.append_jsonl(old, "coding_step", {"type": "thought", "stage": "code", "step": 4})
    with pytest.raises(RecordError, match=rf"{old}:8: expected type 'reply' or 'tool_result', found 'thought'"):
        list(records.lines(old, kinds.CodingStep))


def test_a_check_the_coding_agent_ran_is_told_from_its_counts_and_in_an_older_log_from_its_output(tmp_path):
    """The run_check result line carries what the check found, counted from its report; review says
    it from the counts (a line written before them: from the check output's first line)."""
    from envforge.pipeline.check.checker import CheckReport
    from envforge.pipeline.generate.agent import _found, format_check
    from envforge.pipeline.located import Problem
    from envforge.pipeline.review.history import agent_attempts

    report = CheckReport("env", [Problem("env_main.py", "", "a step that returns", "KeyError 'pos'", line=12),
                                 Problem("config.yaml", "meta", "a description", "none", severity="warning")])
    found = _found(report)
    assert found == kinds.CheckFound(1, 1, "env_main.py:12: expected a step that returns, found KeyError 'pos'")
    log = tmp_path / layout.TRAJECTORY
    records.append(log, kinds.CodingReply("repair", 1, [{"name": "run_check", "arguments": {}}] * 3))
    records.append(log, kinds.CodingToolResult("repair", 1, "run_check", False, format_check(report), found))
    # counts that say otherwise than the text beside them: the counts are what review reads
    records.append(log, kinds.CodingToolResult("repair", 1, "run_check", False, "check passed (0 warning(s)).",
                                               kinds.CheckFound(2, 0, "levels/level_01.yaml: expected ..., found")))
    records.append_jsonl(log, "coding_step", {"type": "tool_result", "stage": "repair", "step": 1,  # before counts
                                              "tool": "run_check", "error": False, "result": format_check(report)})
    (repair,) = agent_attempts(log)
    assert repair.checks == [
        "failed: 1 error(s), 1 warning(s); first: env_main.py:12: expected a step that returns, found KeyError 'pos'",
        "failed: 2 error(s), 0 warning(s); first: levels/level_01.yaml: expected ..., found",
        "failed: 1 error(s), 1 warning(s); first: env_main.py:12: expected a step that returns, found KeyError 'pos'"]
    assert [entry.check for _, entry in list(records.lines(log, kinds.CodingStep))[1:]] == [
        found, kinds.CheckFound(2, 0, "levels/level_01.yaml: expected ..., found"), None]
    assert "check" not in json.loads(log.read_text().splitlines()[0])  # a reply, and lines without one, unchanged
    assert _found(CheckReport("env", [])).verdict == "passed"
    # a newer envforge's line, with fields this one does not know (in the line and in its counts)
    records.append(log, kinds.CodingReply("repair", 2, [{"name": "run_check", "arguments": {}}]))
    records.append_jsonl(log, "coding_step", {"type": "tool_result", "stage": "repair", "step": 2, "tool": "run_check",
                                              "error": False, "result": "check failed.", "took_seconds": 1.5,
                                              "check": {"errors": 2, "warnings": 0, "infos": 1}})
    assert agent_attempts(log)[0].checks[-1] == "failed: 2 error(s), 0 warning(s)"  # as review says it
    newer = list(records.lines(log, kinds.CodingStep))[-1][1]
    assert newer.check.verdict == "failed: 2 error(s), 0 warning(s)" and newer.extra == {"took_seconds": 1.5}
    assert newer.to_dict()["check"] == {"errors": 2, "warnings": 0, "first_error": "", "infos": 1}  # its own kept


@pytest.mark.slow
def test_verify_writes_verification_json_as_its_model_and_review_reads_it_back(tmp_path):
    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    done = envforge("verify", env, "--stages", "execution", "--write")
    assert done.returncode == 0, done.stdout + done.stderr
    verification = records.read(env / layout.VERIFICATION, kinds.Verification)
    assert records.KINDS["verification"] is kinds.Verification
    assert verification.accepted and verification.stage is None and verification.verified_at
    assert verification.options["search_nodes"] > 0 and set(verification.stages.to_dict()) >= {"execution", "total"}
    assert verification.stages.execution.levels == 15 and verification.stages.total.wall_seconds > 0
    assert manifest.read(env).verification.verified_at == verification.verified_at
    from envforge.pipeline.review.details import _verification
    assert _verification(env)["stages"] == verification.stages.to_dict()


def test_each_stage_s_figures_say_themselves_in_the_line_verify_prints():
    """`envforge verify` prints `STAGE: figures.summary()`: each figures shape says what its line
    holds (a ReAct rollout with no level to play says so, where it printed 'on None')."""
    levels = kinds.LevelsFigures(3, 1, seeds_tried=20, generated_kept=10, duplicates=2, rejected_by_validator=1,
                                 unfit=1, levels_scored=["a", "b"], corrected=1, search_nodes=12345,
                                 search_seconds=2.5, nodes_per_second=4938, exact_levels=["a"], lower_bounds=["b", "c"],
                                 stopped_at_claim=["c"], gaps={"b": 1.0}, no_upper_bound={"c": "why", "d": "other"},
                                 unknown_maxima={"e": "x"}, cut_by_safety_stop=["b"], generator_safety_stop="x",
                                 validator_refuted={"a": 1})
    assert levels.summary() == (
        "20 seeds tried, 10 kept, 2 duplicates, 1 rejected by the validator, 1 unfit; 2 levels scored, 1 max "
        "reward(s) corrected; search 12345 nodes in 2.5s (4,938 nodes/s); 1 max reward(s) exact; 2 only a lower "
        "bound (search budget spent on 1; the search stopped on reaching the validator's or shipped claim, which "
        "proves nothing on 1: gap to the DSL's reward bound at most 1 on 1; no upper bound on 2: other (and 1 other "
        "reason(s))); 1 unknown; 1 cut by the --search-seconds safety stop (load-dependent); a generator or "
        "validator call cut by the --generator-seconds safety stop (load-dependent); validator refuted on 1 "
        "level(s) (a replayed witness scores where it rejects); 3s wall, 1s CPU")
    assert kinds.LevelsFigures(lower_bounds=["b"], stopped_at_claim=["b"]).summary().startswith(
        "0 seeds tried, 0 kept, 0 duplicates, 0 rejected by the validator, 0 unfit; 0 levels scored, 0 max reward(s) "
        "corrected; search 0 nodes in 0s; 0 max reward(s) exact; 1 only a lower bound (the search stopped on "
        "reaching the validator's or shipped claim, which proves nothing); 0s wall")
    assert kinds.StageFigures(1.5, 0.25).summary() == "1.5s wall, 0.25s CPU"
    assert kinds.ExecutionFigures(2.0, 1.0, levels=3, episodes=9, steps=30, planner_nodes=100,
                                  failures_by_kind={"timeout": 1}).summary() == \
        "9 episodes (30 steps) on 3 levels, planner search 100 nodes, failures {'timeout': 1}; 2s wall, 1s CPU"
    assert kinds.ReliabilityFigures(1, 2, levels=2, episodes=40, margin=0.1, random_normalized=0.2,
                                    planner_normalized=0.9).summary() == \
        "random agent 0.2 vs planner 0.9 normalized (margin 0.1), 40 episodes; 1s wall, 2s CPU"
    assert kinds.ReliabilityFigures().summary() == \
        "random agent ? vs planner ? normalized (margin 0), 0 episodes; 0s wall, 0s CPU"
    assert kinds.ReactFigures("m", True, "levels/l1.yaml", 10, "done", 3.0, 0).summary() == \
        "ReAct rollout with m: 10 step(s) on levels/l1.yaml, stopped: done, reward 3.0"
    assert kinds.ReactFigures("m", False, note="no test level to play").summary() == \
        "ReAct rollout with m: not played (no test level to play)"
    assert kinds.DifferentialFigures("w", "s", 2, 5, 0.1, 0.9).summary() == \
        "w 0.1 vs s 0.9 normalized over 2 run(s) of 5 level(s)"
    every = kinds.VerifyFigures(reliability_models=kinds.DifferentialFigures("w", "s", 2, 5, 0.1, 0.9),
                                execution_react=kinds.ReactFigures("m", False, note="n"), total=kinds.StageFigures(),
                                reliability=kinds.ReliabilityFigures(), levels=levels,
                                execution=kinds.ExecutionFigures())
    assert list(every.to_dict()) == ["execution", "levels", "reliability", "total", "execution_react",
                                     "reliability_models"]  # the model-free stages' figures, then the model forms'
    assert kinds.VerifyFigures.from_dict(json.loads(json.dumps(every.to_dict()))) == every


def test_verify_certification_of_a_level_reads_back_as_typed_fields_and_foreign_entries_still_load(tmp_path):
    """level_max_rewards.json as verify writes it (the references): its certification fields are the
    entry's declared fields (not an open `extra`); every twelve AutoEnv files (plain numbers, or
    {"max_reward": x} with the authors' own fields) still read, as claims with no certification."""
    crate = records.read(REFERENCE / "crate_dock" / layout.LEVEL_MAX_REWARDS, LevelMaxRewards).levels
    entry = crate["level_01.yaml"]
    assert entry.extra == {} and entry.verified
    assert (entry.certainty, entry.exact, entry.proof, entry.split) == ("certified", True, "upper_bound", "levels")
    assert entry.search_nodes > 0 and entry.witness and all(isinstance(a, dict) for a in entry.witness)
    assert entry.evidence_bound is None and "evidence_bound" in entry.to_dict()  # verify writes its null bounds
    tide = records.read(REFERENCE / "tide_pool" / layout.LEVEL_MAX_REWARDS, LevelMaxRewards).levels
    assert {e.certainty for e in tide.values()} == {"certified"} and not any(e.exact for e in tide.values())
    assert {e.upper_bound for e in tide.values()} == {50.0}
    corpus = Path("/work/shared/autoenv-dev")
    for path in sorted(corpus.glob("*/level_max_rewards.json")) if corpus.is_dir() else []:
        read = LevelMaxRewards.from_dict(json.loads(path.read_text()), str(path)).levels
        assert read and not any(e.verified for e in read.values()), path
    # A foreign tool using verify's names for its own values: its max is a claim, and the folder still opens.
    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    shipped = json.loads((env / layout.LEVEL_MAX_REWARDS).read_text())
    shipped["levels"] = {"level_01.yaml": {"max_reward": 1.0, "certainty": "unknown", "witness": "go north"},
                         "level_02.yaml": {"max_reward": 1.0, "certainty": "unknown"}, "level_03.yaml": 1.0}
    (env / layout.LEVEL_MAX_REWARDS).write_text(json.dumps(shipped))
    (env / layout.MANIFEST).unlink()  # a folder envforge did not make: its unchecked claims are noted
    from envforge.pipeline.envfolder.spec import EnvSpec
    spec = EnvSpec.open(env)
    # an entry saying its max is unknown is taken at its word, whatever else in it does not fit
    assert spec.scoring_max("level_01.yaml") == (None, "the max reward of level_01.yaml is unknown (verify's search "
                                                       "found no reward); left out of normalized scores")
    assert spec.scoring_max("level_02.yaml") == (None, "the max reward of level_02.yaml is unknown (verify's search "
                                                       "found no reward); left out of normalized scores")


def test_only_a_certainty_verify_writes_in_an_entry_that_fits_is_verify_s_certification(tmp_path):
    """An entry saying its max is uncertain is taken at its word even when another field does not fit;
    "certified" in an entry that does not fit, or a certainty verify never writes, is a claim, noted as
    not checked, also in a folder envforge made."""
    from envforge.pipeline.envfolder.spec import EnvSpec

    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    shipped = json.loads((env / layout.LEVEL_MAX_REWARDS).read_text())
    shipped["levels"] = {"level_01.yaml": {"max_reward": 2.0, "certainty": "lower_bound", "witness": "go north"},
                         "level_02.yaml": {"max_reward": 2.0, "certainty": "certified", "witness": "go north"},
                         "level_03.yaml": {"max_reward": 2.0, "certainty": "guessed"},
                         "level_04.yaml": {"max_reward": 2.0, "certainty": "certified", "exact": True}}
    (env / layout.LEVEL_MAX_REWARDS).write_text(json.dumps(shipped))
    spec = EnvSpec.open(env)  # its manifest names an origin: a folder envforge made
    assert spec.scoring_max("level_01.yaml") == (2.0, "the max reward of level_01.yaml (2) is lower bound: not "
                                                      "certified")
    for key in ("level_02.yaml", "level_03.yaml"):
        assert spec.scoring_max(key) == (2.0, f"the max reward of {key} (2) is the environment's own claim, not "
                                              f"checked by envforge verify")
    assert spec.scoring_max("level_04.yaml") == (2.0, "")


@pytest.mark.parametrize("certainty", kinds.LevelMaxEntry.CERTAINTIES)
def test_every_entry_verify_writes_reads_back_as_a_level_max_entry_with_its_certainty(certainty):
    """verify's writer (LevelMax.entry, written as JSON) against the reader (LevelMaxEntry, and the
    scoring's certainty), for every certainty it writes; and every entry of the references (which
    verify's path rebuilds byte for byte) reads back as it was written."""
    from envforge.pipeline.envfolder.spec import _certainty
    from envforge.pipeline.levelmax import LevelMax

    lm = LevelMax("levels/level_01.yaml", "h", 3.0, "bfs", None, 3.0, certainty != "lower_bound", 41,
                  witness=[{"action": "push", "params": {"dir": "north"}}], notes="n", certainty=certainty,
                  seed=None if certainty != "estimate" else 7,
                  expectation={"mean": 3.0, "seeds": 8, "ci95": [2.5, 3.5]} if certainty == "estimate" else None)
    written = json.loads(json.dumps(lm.entry().to_dict()))
    read = kinds.LevelMaxEntry.from_dict(written, "entry")
    assert read.to_dict() == written and read.verified and read.certainty == certainty == _certainty(written, True)
    for name in ("crate_dock", "tide_pool"):
        shipped = json.loads((REFERENCE / name / layout.LEVEL_MAX_REWARDS).read_text())
        for key, raw in shipped["levels"].items():
            entry = kinds.LevelMaxEntry.from_dict(raw, f"{name} {key}")
            assert entry.to_dict() == raw and _certainty(raw, True) == raw["certainty"] == "certified", (name, key)


def test_a_certified_entry_in_a_file_envforge_did_not_write_is_a_claim(tmp_path):
    """verify's certification is honoured only in a file with envforge's format stamp: the same
    entries, the stamp removed (a foreign or hand-edited file), are claims noted as not checked."""
    from envforge.pipeline.envfolder.spec import EnvSpec

    env = shutil.copytree(REFERENCE / "crate_dock", tmp_path / "crate_dock")
    assert EnvSpec.open(env).scoring_max("level_01.yaml") == (1.0, "")  # the reference: certified
    shipped = json.loads((env / layout.LEVEL_MAX_REWARDS).read_text())
    for stamp in ({}, {"format": "envforge.level_max_rewards/9"}, {"format": "autoenv.level_max_rewards/1"}):
        (env / layout.LEVEL_MAX_REWARDS).write_text(json.dumps(
            {**{k: v for k, v in shipped.items() if k not in ("format", "envforge")}, **stamp}))
        assert EnvSpec.open(env).scoring_max("level_01.yaml") == (
            1.0, "the max reward of level_01.yaml (1) is the environment's own claim, not checked by envforge "
                 "verify"), stamp
