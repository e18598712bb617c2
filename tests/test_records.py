"""Versioned records (pipeline/records.py): every JSON and JSONL file the offline demos write
names its format and the envforge that wrote it; a record from a newer envforge is refused in
one line with exit 2; the SQLite databases carry a schema version; a full disk loses nothing.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from cli_kit import REFERENCE, envforge

from envforge.pipeline import __version__, records

# Every kind of record each command writes, on a small workload: one run of two levels of each
# reference env (4 episodes), two probe items of each kind.
EVALUATE = ["evaluate", str(REFERENCE), "--agent", "random", "--runs", "1", "--max-levels", "2"]


@pytest.fixture(scope="module")
def demos(tmp_path_factory, generate_demo, learn_demo):
    """The README's offline demos of generate, evaluate, learn and probe, each in its own folder
    (generate and learn: copies of the session's one run of each, conftest.py)."""
    tmp = tmp_path_factory.mktemp("record_demos")
    for name, run in (("generate", generate_demo), ("learn", learn_demo)):
        assert run.returncode == 0, f"{name}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
        run.copy_to(tmp / name)
    commands = {
        "evaluate": [*EVALUATE, "--out", str(tmp / "evaluate")],
        "probe": ["probe", str(REFERENCE / "crate_dock"), "--kind", "all", "--n", "2",
                  "--out", str(tmp / "probe" / "crate_dock.jsonl")],
        "probe scores": ["evaluate", "--probes", str(tmp / "probe" / "crate_dock.jsonl"), "--agent", "random",
                         "--out", str(tmp / "probe")],
    }
    for name, args in commands.items():
        done = envforge(*args, cwd=tmp)
        assert done.returncode == 0, f"{name}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return tmp


def _records(folder: Path):
    """(path, line number or 0, parsed object) of every JSON and JSONL file under `folder`."""
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".json":
            yield path, 0, json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".jsonl":
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if line.strip():
                    yield path, number, json.loads(line)


@pytest.mark.slow
def test_every_json_and_jsonl_file_the_demos_write_names_its_format_and_writer(demos):
    seen, missing = set(), []
    for path, number, data in _records(demos):
        seen.add(path.relative_to(demos).parts[0])
        if not (isinstance(data, dict) and isinstance(data.get("format"), str) and data.get("envforge") == __version__):
            missing.append(f"{path.relative_to(demos)}:{number}")
    assert seen >= {"generate", "evaluate", "learn", "probe"}
    assert not missing, missing[:20]
    kinds = {data["format"] for _, _, data in _records(demos)}
    assert {"envforge.manifest/1", "envforge.verification/1", "envforge.rejection/1", "envforge.episode/1",
            "envforge.trajectory/1", "envforge.evaluate_summary/1", "envforge.study/1", "envforge.pool/1",
            "envforge.probe_item/1", "envforge.probe_report/1", "envforge.model_call/1"} <= kinds


@pytest.mark.slow
def test_every_record_the_demos_write_reads_back_as_its_kinds_model(demos):
    """One model per kind (pipeline/kinds.py), none left untyped: every file and line the demos
    write reads back through records.read/lines as its kind's model, and writes back the same."""
    from envforge.pipeline import kinds

    assert all(dataclasses.is_dataclass(model) and model.KIND for model in kinds.MODELS)
    assert len({model.KIND for model in kinds.MODELS}) == len(kinds.MODELS) == len(records.KINDS)
    read, unfit = set(), []
    files = {}  # (path, model) -> its lines read back (a RecordError when they do not), read once a file
    for path, number, data in _records(demos):
        kind = data["format"].removeprefix("envforge.").split("/")[0]
        model = records.KINDS[kind]
        try:
            if number:
                if (path, model) not in files:
                    try:
                        files[path, model] = dict(records.lines(path, model))
                    except kinds.RecordError as e:
                        files[path, model] = e
                if isinstance(files[path, model], kinds.RecordError):
                    raise files[path, model]
                record = files[path, model][number]
            else:
                record = records.read(path, model)
        except kinds.RecordError as e:
            unfit.append(str(e))
            continue
        assert isinstance(record, model)
        body = {k: v for k, v in data.items() if k not in ("format", "envforge")}
        assert json.loads(json.dumps(record.to_dict(), default=str)) == body, f"{path}:{number}"
        read.add(kind)
    assert not unfit, unfit[:5]
    assert {"manifest", "verification", "rejection", "episode", "trajectory", "evaluate_summary", "study", "pool",
            "probe_item", "probe_report", "model_call", "coding_step", "learn_results", "training_levels",
            "theme"} <= read


def _bump(path: Path, line: int = 0) -> str:
    """Rewrite one record of `path` as if envforge 9.0 had written it in major version 2."""
    if path.suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        data = json.loads(lines[line - 1])
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
    kind = data["format"].split("/")[0]
    data.update(format=f"{kind}/2", envforge="9.0")
    if path.suffix == ".jsonl":
        lines[line - 1] = json.dumps(data)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return f"{kind}/2"


def _refused(done: subprocess.CompletedProcess, found: str, where: Path) -> None:
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(where) in lines[0] and f"format {found} (written by envforge 9.0)" in lines[0]
    assert f"this envforge {__version__} reads" in lines[0]


@pytest.mark.slow
def test_evaluate_refuses_an_episode_record_from_a_newer_envforge(demos, tmp_path):
    out = shutil.copytree(demos / "evaluate", tmp_path / "evaluate")
    found = _bump(out / "episodes.jsonl", line=2)
    done = envforge(*EVALUATE, "--out", str(out), "--resume", cwd=tmp_path)
    _refused(done, found, out / "episodes.jsonl")


@pytest.mark.slow
def test_learn_refuses_a_study_from_a_newer_envforge(demos, tmp_path):
    out = shutil.copytree(demos / "learn", tmp_path / "learn")
    found = _bump(out / "study.json")
    done = envforge("learn", "--resume", "--provider", "replay", "--out", str(out), cwd=tmp_path)
    _refused(done, found, out / "study.json")


@pytest.mark.slow
def test_review_refuses_a_manifest_from_a_newer_envforge(demos, tmp_path):
    out = shutil.copytree(demos / "generate", tmp_path / "generate")
    manifest = next(p / "manifest.json" for p in sorted(out.iterdir()) if (p / "manifest.json").is_file())
    found = _bump(manifest)
    done = envforge("review", "--out", str(out), cwd=tmp_path)
    _refused(done, found, manifest)


@pytest.mark.slow
def test_probe_scoring_refuses_items_from_a_newer_envforge(demos, tmp_path):
    items = shutil.copy(demos / "probe" / "crate_dock.jsonl", tmp_path / "items.jsonl")
    found = _bump(Path(items), line=1)
    done = envforge("evaluate", "--probes", str(items), "--agent", "random", "--out", str(tmp_path), cwd=tmp_path)
    _refused(done, found, Path(items))


@pytest.mark.slow
def test_an_episode_record_with_a_field_this_envforge_does_not_know_is_refused_not_dropped(demos, tmp_path):
    out = shutil.copytree(demos / "evaluate", tmp_path / "evaluate")
    path = out / "episodes.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "seed_offset": 7})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = envforge(*EVALUATE, "--out", str(out), "--resume", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{path}:1: expected the fields of envforge.episode/1, found unknown field(s) seed_offset" in done.stderr


@pytest.mark.slow
def test_the_run_database_refuses_a_schema_from_a_newer_envforge(demos, tmp_path):
    out = shutil.copytree(demos / "generate", tmp_path / "generate")
    db = sqlite3.connect(out / "envforge.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == records.SQLITE_SCHEMAS["run_db"]
    db.execute("PRAGMA user_version = 7")
    db.commit()
    db.close()
    done = envforge("review", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "envforge.sqlite: its schema version is 7, written by a newer envforge" in done.stderr


def test_a_full_database_is_known_by_sqlite_s_error_code_not_by_the_words_of_its_message(tmp_path, monkeypatch):
    real = sqlite3.connect

    def capped(path, **connect):  # a database that may grow to one page: the next write finds it full
        conn = real(path, **connect)
        conn.execute("PRAGMA max_page_count = 1")
        return conn

    monkeypatch.setattr(sqlite3, "connect", capped)
    with pytest.raises(records.DiskFull, match=r"a\.sqlite: expected room to write it, found the disk full"):
        records.open_sqlite(tmp_path / "a.sqlite", "CREATE TABLE t (x TEXT); CREATE TABLE u (y TEXT);", "run_db")
    monkeypatch.undo()
    with pytest.raises(sqlite3.OperationalError, match="no such table: fullness"):  # "full" in it, not full
        records.open_sqlite(tmp_path / "b.sqlite", "SELECT * FROM fullness;", "run_db")


def test_the_response_cache_carries_its_schema_version_and_refuses_a_newer_one(tmp_path):
    from envforge.pipeline.llm.cache import ResponseCache

    ResponseCache(tmp_path / "cache.sqlite")
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == records.SQLITE_SCHEMAS["response_cache"]
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    with pytest.raises(records.RecordError, match="its schema version is 3, written by a newer envforge"):
        ResponseCache(tmp_path / "cache.sqlite")


def test_a_record_without_format_is_read_as_version_1_and_another_kind_is_refused(tmp_path):
    old = tmp_path / "study.json"
    old.write_text(json.dumps({"envs": ["a"]}))
    assert records.read_json(old, "study") == {"envs": ["a"]}
    records.write_json(old, "pool", {"env": "a"})
    with pytest.raises(
        records.RecordError, match="expected a record of format envforge.study/1, found envforge.pool/1"
    ):
        records.read_json(old, "study")


def test_a_record_nested_100000_deep_is_a_located_record_error_and_a_journal_line_is_left_out(tmp_path, capsys):
    """A record may come with a folder from anywhere: it is read by the one bounded JSON reader."""
    deep = tmp_path / "study.json"
    deep.write_text('{"envs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(records.RecordError, match="study.json: expected JSON .*found invalid JSON: deeper nesting"):
        records.read_json(deep, "study")
    journal = tmp_path / "pool.jsonl"
    records.append_jsonl(journal, "pool", {"env": "a"})
    with open(journal, "a") as f:
        f.write('{"env": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    records.append_jsonl(journal, "pool", {"env": "b"})
    assert [data["env"] for _, data in records.read_jsonl(journal, "pool")] == ["a", "b"]
    assert "pool.jsonl:2: expected a JSON record (envforge.pool/1), found a line that is not JSON; left out" \
        in capsys.readouterr().err


def test_an_atomic_write_leaves_no_temporary_file_and_replaces_the_whole_file(tmp_path):
    target = tmp_path / "deep" / "summary.json"
    records.write_json(target, "evaluate_summary", {"methods": [1, 2]})
    records.write_json(target, "evaluate_summary", {"methods": []})
    assert json.loads(target.read_text()) == {"format": "envforge.evaluate_summary/1", "envforge": __version__,
                                              "methods": []}
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB file system of its own (tmpfs), so a write can really run out of space."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path, leave: int = 0) -> None:
    """Fill the file system, then free `leave` bytes again."""
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    if leave:
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    os.close(fd)


def test_a_full_disk_keeps_the_previous_file_and_says_so_in_one_line(tiny_disk):
    target = tiny_disk / "study.json"
    records.write_json(target, "study", {"envs": ["kept"]})
    _fill(tiny_disk)
    with pytest.raises(records.DiskFull) as caught:
        records.write_json(target, "study", {"envs": ["x" * 100_000]})
    assert str(caught.value).startswith(f"{target}: expected room to write it, found the disk full")
    assert "the previous version is kept" in str(caught.value)
    assert records.read_json(target, "study") == {"envs": ["kept"]}
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler", "study.json"]  # no temporary file left


@pytest.mark.slow
def test_evaluate_on_a_full_disk_ends_in_one_line_and_exit_2(tiny_disk, tmp_path):
    _fill(tiny_disk, leave=16 * 1024)  # a little room: the folder and some lines fit, the episodes do not
    done = envforge("evaluate", str(REFERENCE / "crate_dock"), "--agent", "random", "--out", str(tiny_disk / "ev"),
                    cwd=tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    plan, error = done.stderr.strip().splitlines()  # the plan line comes before any work, then one error line
    assert plan.startswith("evaluate: random: ") and "planned" in plan
    assert "found the disk full (No space left on device)" in error


def test_a_log_linked_to_a_file_outside_is_neither_truncated_nor_appended_to(tmp_path):
    from envforge.pipeline.testing.tiny_env import write_env

    env = write_env(tmp_path / "corridor")
    out = tmp_path / "eval"
    args = ("evaluate", str(env), "--agent", "random", "--max-levels", "1", "--runs", "1", "--out", str(out))
    assert envforge(*args, cwd=tmp_path).returncode == 0
    victim = tmp_path / "bashrc"
    victim.write_text("ORIGINAL\n")
    (trajectory,) = (out / "trajectories").rglob("*.jsonl")
    trajectory.unlink()
    os.symlink(victim, trajectory)  # as someone else's run folder might hold
    (out / "episodes.jsonl").write_text("")  # so that --resume plays the episode again
    again = envforge(*args, "--resume", cwd=tmp_path)
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"{trajectory}: expected a regular file to write, found a symbolic link (never followed)" in again.stderr
    assert "Traceback" not in again.stderr
    with pytest.raises(records.RecordError, match="found a symbolic link"):
        records.append_jsonl(trajectory, "trajectory", {"step": 1})
    assert victim.read_text() == "ORIGINAL\n"
