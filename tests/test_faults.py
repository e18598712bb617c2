"""Issue 37: every fault a user can cause or meet ends in one located line, with the documented
exit status, and loses nothing; outputs land only where the user said.

A full disk is a small file system of its own (tmpfs: needs root, as in CI; skipped otherwise) or
the file-size limit (RLIMIT_FSIZE, any user: the write fails with EFBIG, which Python does not
die of); a read-only folder is a read-only mount as root, a folder without write permission
otherwise; a closed pipe is a reader that goes away.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import ENVFORGE, REFERENCE, envforge, offline_environ, tree_digests

CRATE_DOCK = REFERENCE / "crate_dock"


def _mount_tmpfs(folder: Path, *options: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """A 400 KiB file system: generate's demo runs out of room in its first theme's levels."""
    mount = tmp_path / "disk"
    if not _mount_tmpfs(mount, "size=400k"):
        pytest.skip("cannot mount a small tmpfs here (needs root; CI runs this as root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def read_only(tmp_path):
    """A folder no command may write into: a read-only mount as root (root writes through any
    permission), a folder without write permission for anyone else."""
    folder = tmp_path / "read_only"
    if os.geteuid() == 0:
        if not _mount_tmpfs(folder, "ro", "size=64k"):
            pytest.skip("cannot mount a read-only tmpfs here")
        yield folder
        subprocess.run(["umount", "-l", str(folder)], check=False)
    else:
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


def _db(out: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(out / "envforge.sqlite")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("envforge ")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


# -- a full disk ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_generate_on_a_full_disk_stops_in_one_line_and_its_resume_loses_nothing(small_disk):
    out = small_disk / "run"
    done = envforge("generate", "--demo", "--out", out, cwd=small_disk.parent)
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_error_line(done)
    assert line == done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"envforge generate: error: {out}/")
    assert "expected room to write it, found the disk full (No space left on device)" in line
    assert line.endswith(f"`envforge generate --demo --out {out} --resume` continues where it stopped")
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)  # room again (to read, too)
    # No theme was judged for the disk's fault: none is an error or a rejection; what ran is resumable.
    assert {status for _, status in _db(out, "SELECT name, status FROM themes")} <= {"running"}
    assert "error" not in {s for (s,) in _db(out, "SELECT status FROM stage_attempts")}

    resumed = envforge("generate", "--demo", "--out", out, "--resume", cwd=small_disk.parent)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "2 of 3 theme(s) accepted" in resumed.stdout  # the demo's own result: nothing was lost
    assert "| 100% | 100% | 67% | 67% |" in resumed.stdout


def _export_with_file_size_limit(out: Path, limit: int | None) -> subprocess.CompletedProcess:
    def limited():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([ENVFORGE, "export", "verifiers", str(CRATE_DOCK), "--out", str(out)], cwd=out.parent,
                          env=offline_environ(out.parent), capture_output=True, text=True, preexec_fn=limited,
                          timeout=300)


def test_an_export_cut_short_by_the_file_size_limit_leaves_nothing_that_blocks_the_retry(tmp_path):
    out = tmp_path / "exported"
    done = _export_with_file_size_limit(out, 16 * 1024)  # level_max_rewards.json is twice that
    assert done.returncode == 2, done.stderr
    line = _one_error_line(done)
    assert "level_max_rewards.json: expected room to write it, found the file-size limit reached" in line
    assert sorted(p.name for p in out.iterdir()) == []  # no half-written package, no staging folder

    retried = _export_with_file_size_limit(out, None)
    assert retried.returncode == 0, retried.stderr
    assert sorted(p.name for p in out.iterdir()) == ["envforge_crate_dock"]


# -- a folder envforge may not write ----------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["evaluate", str(CRATE_DOCK), "--agent", "random", "--max-levels", "1", "--runs", "1", "--out", "{ro}/ev"],
    ["learn", str(CRATE_DOCK), "--provider", "replay", "--iterations", "1", "--out", "{ro}/study"],
    ["probe", str(CRATE_DOCK), "--kind", "predict", "--n", "3", "--out", "{ro}/probes.json"],
    ["export", "verifiers", str(CRATE_DOCK), "--out", "{ro}/exported"],
    ["generate", "--demo", "--out", "{ro}/run"],
], ids=lambda argv: argv[0])
def test_a_read_only_out_is_refused_in_one_line_before_any_work(argv, read_only, tmp_path):
    argv = [a.replace("{ro}", str(read_only)) for a in argv]
    done = envforge(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    line = _one_error_line(done)
    assert done.stderr.strip() == line and done.stdout == ""  # refused before any work: nothing else printed
    found = "a read-only file system" if os.geteuid() == 0 else "no permission to write"
    assert line == (f"envforge {argv[0]}: error: argument --out: expected a folder envforge can write, found {found} "
                    f"at '{read_only}'; choose another folder")
    assert list(read_only.iterdir()) == []


# -- a closed pipe ------------------------------------------------------------------------------

def _reader_leaves_after(argv: list[str], lines: int, cwd: Path, both: bool) -> tuple[int, str, str]:
    """Run envforge with its stdout (and, `both`, its stderr) into a pipe whose reader reads `lines`
    lines, then goes away; (exit status, what it read, stderr when not in the pipe)."""
    r, w = os.pipe()
    err = cwd / "stderr.txt"
    with open(err, "w") as err_file:
        proc = subprocess.Popen([ENVFORGE, *argv], cwd=cwd, env=offline_environ(cwd), stdout=w,
                                stderr=w if both else err_file)
        os.close(w)
        with os.fdopen(r) as reader:
            read = "".join(reader.readline() for _ in range(lines))
        code = proc.wait(timeout=600)
    return code, read, err.read_text()


@pytest.mark.slow
def test_generate_whose_reader_goes_away_stops_and_its_resume_loses_nothing(tmp_path):
    out = tmp_path / "run"
    code, read, _ = _reader_leaves_after(["generate", "--demo", "--out", str(out)], 3, tmp_path, both=True)
    assert code == 141 and read.count("\n") == 3
    # The closed pipe is no finding: no theme is an error (it was a BrokenPipeError, an "internal
    # error" of a stage), the stage cut short is recorded as interrupted, the run as interrupted.
    assert {status for _, status in _db(out, "SELECT name, status FROM themes")} == {"running"}
    assert set(s for (s,) in _db(out, "SELECT status FROM stage_attempts")) <= {"done", "interrupted"}
    assert _db(out, "SELECT status FROM runs") == [("interrupted",)]
    resumed = envforge("generate", "--demo", "--out", out, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "2 of 3 theme(s) accepted" in resumed.stdout


def test_evaluate_whose_stdout_reader_goes_away_keeps_every_episode_and_says_so(tmp_path):
    out = tmp_path / "ev"
    argv = ["evaluate", str(CRATE_DOCK), "--agent", "random", "--max-levels", "2", "--runs", "1", "--out", str(out)]
    code, read, stderr = _reader_leaves_after(argv, 0, tmp_path, both=False)
    assert code == 141, stderr  # not 120, Python's "could not flush stdout at exit"
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"envforge evaluate: stopped: the reader of its output went away (a closed pipe); `envforge {' '.join(argv)} "
        f"--resume` continues where it stopped")
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2


# -- Ctrl-C ---------------------------------------------------------------------------------------

INTERRUPT_WHILE_LOADING = """
import sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "envforge.pipeline.commands.evaluate":
            raise KeyboardInterrupt  # as SIGINT does, while the command's modules load
sys.meta_path.insert(0, CtrlC())
from envforge.pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_the_command_loads_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-c", INTERRUPT_WHILE_LOADING, "evaluate", str(CRATE_DOCK), "--agent",
                           "random", "--out", str(tmp_path / "ev")], cwd=tmp_path, env=offline_environ(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 130
    assert done.stderr == "envforge evaluate: interrupted before it started; nothing was done\n"
    assert not (tmp_path / "ev").exists()


def test_the_command_lines_interrupt_status_is_the_generate_interrupts():
    from envforge.pipeline import cli
    from envforge.pipeline.generate import interrupt

    assert cli.EXIT_INTERRUPTED == interrupt.EXIT_INTERRUPTED == 128 + signal.SIGINT


# -- outputs land only where the user said ---------------------------------------------------------

def test_an_out_inside_an_environment_folder_or_another_run_is_refused(tmp_path):
    env = Path(shutil.copytree(CRATE_DOCK, tmp_path / "crate_dock"))
    before = tree_digests(env)
    for argv in (["generate", "--demo", "--out", env / "run"], ["generate", "--demo", "--out", env],
                 ["export", "verifiers", CRATE_DOCK, "--out", env / "exported"]):
        done = envforge(*argv, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert _one_error_line(done) == (
            f"envforge {argv[0]}: error: argument --out: expected a folder outside any environment folder, found "
            f"'{env}', an environment folder{'' if argv[-1] == env else ', around it'} (what is written there "
            f"would become part of the environment); choose another folder")
    assert tree_digests(env) == before

    first = tmp_path / "ev"
    assert envforge("evaluate", CRATE_DOCK, "--agent", "random", "--max-levels", "1", "--runs", "1", "--out", first,
                    cwd=tmp_path).returncode == 0
    done = envforge("evaluate", CRATE_DOCK, "--agent", "random", "--out", first / "again", cwd=tmp_path)
    assert done.returncode == 2
    assert _one_error_line(done) == (f"envforge evaluate: error: argument --out: expected a folder outside other "
                                     f"runs' folders, found it inside '{first}', the folder of a run; choose "
                                     f"another folder")
    assert not (first / "again").exists()


def test_generate_writes_into_the_current_folders_generated_envs_for_every_install():
    from envforge.pipeline import paths
    from envforge.pipeline.api.generate import GenerateOptions

    assert paths.GENERATED_ENVS_DIR == Path("generated_envs")  # relative: the folder the command runs in
    assert GenerateOptions().out == "generated_envs"


def _git_tracked_copy(source: Path, where: Path) -> Path:
    shutil.copytree(source, where)
    git = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "reference"], check=True)
    return where


def _git_status(folder: Path) -> str:
    return subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_verify_judges_a_reference_environment_without_changing_it_and_its_write_keeps_every_field(tmp_path):
    env = _git_tracked_copy(CRATE_DOCK, tmp_path / "crate_dock")
    done = envforge("verify", env, "--stages", "execution,levels", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"read-only: nothing written into {env} (--write to record the results there)" in done.stdout
    assert _git_status(env) == ""  # no tracked file changed, nothing added

    shipped = json.loads((CRATE_DOCK / "level_max_rewards.json").read_text())["levels"]
    assert all("seed" in entry for entry in shipped.values())  # what the reference carries beside its maxima
    done = envforge("verify", env, "--stages", "execution,levels", "--write", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads((env / "level_max_rewards.json").read_text())["levels"]
    for key, entry in shipped.items():
        assert set(entry) <= set(written[key]), key  # no field verify did not write is dropped
        assert written[key]["seed"] == entry["seed"]


def test_an_export_ships_only_what_the_environment_needs(generate_demo, tmp_path):
    accepted = sorted(p for p in generate_demo.out.iterdir() if (p / "manifest.json").is_file())[0]
    done = envforge("export", "verifiers", accepted, "--out", tmp_path / "exported", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (project,) = (tmp_path / "exported").iterdir()
    copy = project / project.name / "env" / accepted.name  # the folder, under its own name
    shipped = {str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()}
    source = {str(p.relative_to(accepted)) for p in accepted.rglob("*") if p.is_file()}
    assert {"calls.jsonl", "trajectory.jsonl"} <= source
    assert shipped == source - {"calls.jsonl", "trajectory.jsonl"}
    assert {"env_main.py", "config.yaml", "manifest.json", "level_max_rewards.json"} <= shipped
