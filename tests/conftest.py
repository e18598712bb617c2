# --- LLM layer fixtures (issue 3): loopback model server and an environment without real keys ---
import sys as _llm_sys
from pathlib import Path as _LLMPath

_llm_sys.path.insert(0, str(_LLMPath(__file__).parent))

import pytest as _llm_pytest  # noqa: E402

from envforge.pipeline.testing.llm_server import LLMServer as _LLMServer  # noqa: E402

_LLM_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "ENVFORGE_MODEL", "ENVFORGE_PRICES", "ENVFORGE_CACHE", "ENVFORGE_DOTENV")


@_llm_pytest.fixture
def llm_server():
    """A started loopback server speaking the Anthropic and OpenAI wire formats."""
    server = _LLMServer().start()
    yield server
    server.stop()


@_llm_pytest.fixture
def llm_env(monkeypatch, tmp_path):
    """No real keys or base URLs leak in; dummy keys; fast retries; cache and .env under tmp_path."""
    for name in _LLM_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ENVFORGE_DOTENV", str(tmp_path / ".env"))
    monkeypatch.setenv("ENVFORGE_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("ENVFORGE_RETRY_BASE_DELAY", "0.01")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return tmp_path


@_llm_pytest.fixture
def make_llm_client(llm_server, llm_env, monkeypatch):
    """make_llm_client("openai" | "anthropic", **resolve_options) -> an LLMClient on the loopback server."""
    from envforge.pipeline.llm import LLMClient, resolve

    monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")

    def make(provider: str = "openai", **options):
        options.setdefault("model", "openai/gpt-4o" if provider == "openai" else "anthropic/claude-haiku-4-5")
        options.setdefault("base_url", llm_server.openai_url if provider == "openai" else llm_server.url)
        options.setdefault("cache_path", str(llm_env / "cache.sqlite"))
        return LLMClient(resolve(**options))

    return make
# --- end of LLM layer fixtures ---


# --- hypothesis (tests/test_dsl_property.py, tests/test_learn_algorithm.py): its deadline and its
# "input generation is slow" health check measure wall time, which a busy machine stretches (the
# suite must pass when the machine is busy: the normal-user run of .ci/run failed on it at load 15);
# the properties tested do not depend on time, so neither decides. ---
from hypothesis import HealthCheck as _HealthCheck  # noqa: E402
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("envforge", deadline=None, suppress_health_check=[_HealthCheck.too_slow])
_hypothesis_settings.load_profile("envforge")


# --- bytecode: the suite starts some 3,000 Python processes (commands, sandbox workers), each
# importing envforge's modules. Where PYTHONDONTWRITEBYTECODE is set none of them writes the
# compiled modules, so each compiled envforge's source again: about 0.2 CPU-seconds a command and
# 0.05 a worker. The session compiles the packages once, before any test runs (the controller under
# xdist, before its workers start): every process then reads them, as it would after a first run
# anywhere bytecode is written. Only envforge's own packages and the tests' kits: environment folders
# (tests/fixtures, generated_envs) stay as they are, since their files are copied into sandboxes. ---
def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    import compileall

    root = _LLMPath(__file__).resolve().parent.parent
    for package in ("pipeline", "dsl_schema", "learning", "envforge"):
        compileall.compile_dir(root / package, quiet=2)
    compileall.compile_dir(root / "tests", maxlevels=0, quiet=2)


# --- scheduling under xdist (`--dist loadgroup`, pyproject.toml): tests go to the processes one by
# one, so a module of long tests no longer holds one process while the others wait at the end. A test
# that uses a fixture made once per module or class (a Ray cluster, verify runs, the records demos)
# stays with its module's other such tests in one process (xdist_group), so that fixture is made once;
# the session's artifacts (the demos below) are shared through a file lock and need no group.
# pytest-xdist 3.8 tells its scheduler a test's group by appending "@group" to the test's id, which
# pytest 9.2's structured ids ignore (pytest-xdist issue 1386): every group was split over the
# processes, each making the module's fixtures again (three Ray clusters, three verify runs). So the
# processes write each test's group, and whether it is slow, to a file the controller's scheduler
# reads (_Scheduling). It hands out the groups first (most tests first, as xdist does), then the slow
# tests, then the quick ones, which fill the end while the last slow ones finish; a process holds the
# test it runs and the next one only (xdist: up to three), so two long tests seldom queue in one
# process while another has nothing left to do. ---
_SCHEDULE_DIR = "envforge_schedule_dir"


@_llm_pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the groups into node ids
def pytest_collection_modifyitems(items):
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        scopes = {d.scope for defs in (info.name2fixturedefs.values() if info else ()) for d in defs}
        if scopes & {"module", "class", "package"}:
            item.add_marker(_llm_pytest.mark.xdist_group(item.module.__name__))


@_llm_pytest.hookimpl(tryfirst=True)  # before xdist tells the controller it has collected
def pytest_collection_finish(session):
    where = getattr(session.config, "workerinput", {}).get(_SCHEDULE_DIR)
    if where:
        import json

        groups = {item.nodeid: mark.args[0] if mark.args else mark.kwargs.get("name", "default")
                  for item in session.items if (mark := item.get_closest_marker("xdist_group"))}
        slow = [item.nodeid for item in session.items if item.get_closest_marker("slow")]
        path = _LLMPath(where) / f"{session.config.workerinput['workerid']}.json"
        path.with_suffix(".tmp").write_text(json.dumps({"groups": groups, "slow": slow}))
        path.with_suffix(".tmp").replace(path)  # whole, or not there


@_llm_pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """The controller (xdist): tell each process where to write its tests' groups."""
    config = node.config
    if not hasattr(config, "_envforge_schedule_dir"):
        import tempfile

        config._envforge_schedule_dir = tempfile.mkdtemp(prefix="envforge-schedule-")
    node.workerinput[_SCHEDULE_DIR] = config._envforge_schedule_dir


@_llm_pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadgroup":
        return _Scheduling(config, log)
    return None


def pytest_runtest_logreport(report):
    """The controller: which processes ran each group's tests (the check below)."""
    node = getattr(report, "node", None)
    if node is not None and report.when == "call":
        node.config.__dict__.setdefault("_envforge_ran_in", {})[report.nodeid] = node.gateway.id


@_llm_pytest.hookimpl(trylast=True)  # after xdist has ended its processes
def pytest_sessionfinish(session):
    _check_groups(session)
    _check_left_behind(session)  # below


def _check_groups(session):
    """The controller: a group whose tests ran in two processes made its module's fixtures twice; the
    scheduler above is what keeps them together, and this says so if it no longer does."""
    ran_in = getattr(session.config, "_envforge_ran_in", None)
    where = getattr(session.config, "_envforge_schedule_dir", None)
    if session.config.getvalue("dist") != "loadgroup" or not ran_in or not where or not any(
            _LLMPath(where).glob("*.json")):
        return
    import json

    groups = json.loads(sorted(_LLMPath(where).glob("*.json"))[0].read_text())["groups"]
    processes: dict[str, set[str]] = {}
    for nodeid, group in groups.items():
        if nodeid in ran_in:
            processes.setdefault(group, set()).add(ran_in[nodeid])
    split = {group: sorted(p) for group, p in processes.items() if len(p) > 1}
    if split:
        session.config.get_terminal_writer().line(
            f"\nerror: tests of one xdist group ran in several processes, each making the group's fixtures: {split}",
            red=True)
        session.exitstatus = 1


def pytest_unconfigure(config):
    where = getattr(config, "_envforge_schedule_dir", None)
    if where:
        import shutil

        shutil.rmtree(where, ignore_errors=True)


def _Scheduling(config, log):
    from xdist.scheduler import LoadGroupScheduling

    class Scheduling(LoadGroupScheduling):
        """xdist's loadgroup, its groups read from the files the processes wrote at collection;
        groups, then slow tests, then quick ones; two tests at most waiting in a process."""
        groups: dict[str, str] | None = None
        slow: frozenset[str] = frozenset()
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every process has collected (xdist schedules only then)
                import json

                files = sorted(_LLMPath(config._envforge_schedule_dir).glob("*.json"))
                assert len(files) == len(self.nodes), f"expected {len(self.nodes)} processes' groups, found {files}"
                self.groups, slow = {}, set()
                for path in files:
                    written = json.loads(path.read_text())
                    self.groups.update(written["groups"])
                    slow.update(written["slow"])
                self.slow = frozenset(slow)
            if nodeid in self.groups:
                return self.groups[nodeid]
            return super()._split_scope(nodeid)  # an id xdist gave its "@group"

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is whole: order it once (sorted() keeps xdist's order within)
                def rank(unit) -> int:
                    scope, tests = unit
                    return 0 if len(tests) > 1 else 1 if self.slow.intersection(tests) else 2

                ordered = sorted(self.workqueue.items(), key=rank)
                self.workqueue.clear()
                self.workqueue.update(ordered)
                self.ordered = True
            super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:
            """xdist's, with a process topped up to two tests (it needs the next to run one), not three."""
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)

    return Scheduling(config, log)


# --- plots: evaluate draws two PNGs a run (about 2 CPU-seconds, mostly importing matplotlib); the
# suite runs evaluate some hundred times, so plots are off except where a test asks for them
# (test_evaluate.py's report test). ---
import os as _plots_os  # noqa: E402

_plots_os.environ.setdefault("ENVFORGE_PLOTS", "off")


# --- artifacts made once per session: the README's offline demos (tests/cli_kit.py) ---
# Every xdist worker of one `pytest` run sees the same folder: under xdist the workers' basetemps
# (pytest-N/popen-gwK) share their parent; without xdist the session's basetemp is the whole run.
import os as _artifact_os  # noqa: E402

from cli_kit import Run as _Run  # noqa: E402
from cli_kit import changed_files as _changed_files  # noqa: E402
from cli_kit import shared_artifact as _shared_artifact  # noqa: E402

_REFERENCE = _LLMPath(__file__).parent.parent / "generated_envs" / "reference"
_LEARN_DEMO_ENVS = sorted(f"generated_envs/reference/{p.name}" for p in _REFERENCE.iterdir() if p.is_dir())
GENERATE_DEMO = ["generate", "--themes", "examples/themes.txt", "--provider", "replay"]
LEARN_DEMO = ["learn", *_LEARN_DEMO_ENVS, "--provider", "replay", "--methods", "all", "--iterations", "2"]


@_llm_pytest.fixture(scope="session")
def artifact_cache(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    return (base.parent if _artifact_os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-artifacts"


def _shared(cache, name: str, argv: list[str]):
    run = _shared_artifact(cache, name, argv)
    yield run
    changed = _changed_files(run)
    assert not changed, f"a test wrote into the shared {name} at {run.out} (copy it first: Run.copy_to): {changed}"


@_llm_pytest.fixture(scope="session")
def generate_demo(artifact_cache) -> _Run:
    """`envforge generate --themes examples/themes.txt --provider replay`, run once for the session
    from the repository root. Read it; a test that writes copies it (`generate_demo.copy_to(tmp_path / "x")`)."""
    yield from _shared(artifact_cache, "generate_demo", GENERATE_DEMO)


@_llm_pytest.fixture(scope="session")
def learn_demo(artifact_cache) -> _Run:
    """`envforge learn generated_envs/reference/* --provider replay --methods all --iterations 2`, run
    once for the session from the repository root. Read it; copy it to write into it."""
    yield from _shared(artifact_cache, "learn_demo", LEARN_DEMO)


@_llm_pytest.fixture(scope="session")
def verified_reference(artifact_cache):
    """name -> `envforge verify --json --write` on a copy of generated_envs/reference/<name>, run once for the
    session (test_verify reads its figures, test_search compares a run under load with it); the
    verified copy is the Run's `out`. Read it; copy it to write into it."""
    runs = {}

    def verified(name: str) -> _Run:
        if name not in runs:
            # --write: a reference environment is judged, not changed, unless verify is told to record
            runs[name] = _shared_artifact(artifact_cache, f"verify_{name}", ["verify", "--json", "--write"],
                                          copy_of=_REFERENCE / name)
        return runs[name]

    yield verified
    for name, run in runs.items():
        changed = _changed_files(run)
        assert not changed, f"a test wrote into the shared verified {name} at {run.out} (copy it first): {changed}"


# --- the sandbox tests' `host` fixture (tests/sandbox_kit.py), for every module that asks for it ---
from sandbox_kit import host  # noqa: E402, F401

# --- nothing left behind (issue 37): a run left an `envforge evaluate` that ignored SIGINT alive 40
# minutes after pytest ended, and 46 /tmp/envforge-ray-* folders. The controller marks the session
# in the environment every process it starts inherits (xdist's processes, the commands the tests
# run, a local Ray cluster's processes: envforge passes ENVFORGE_* on); at its end, a process still
# carrying the mark is named, killed, and fails the session. envforge's temporary folders made
# during the session and still there fail it too under CI, where this session runs alone; elsewhere
# they are named as a warning (another session on this machine may have made them). ---
_SESSION_MARK = "ENVFORGE_TEST_SESSION"
_TEMP_PREFIXES = ("envforge-", "efray-")


def _temp_roots() -> list[str]:
    import tempfile

    return sorted({tempfile.gettempdir(), "/tmp"})


def _envforge_temp_folders() -> set[str]:
    found = set()
    for root in _temp_roots():
        try:
            found |= {entry.path for entry in _artifact_os.scandir(root) if entry.name.startswith(_TEMP_PREFIXES)
                      and entry.stat(follow_symlinks=False).st_uid == _artifact_os.getuid()}  # another user's: not ours
        except OSError:
            pass
    return found


def _held(folder: str) -> bool:
    """A folder named after a process that is running (envforge-sbx-PID-…, envforge-ray-PID-…): in
    use, by another session on this machine (one of this session's is named as a process)."""
    pid = _artifact_os.path.basename(folder).split("-")[2:3]
    if not pid or not pid[0].isdigit():
        return False
    try:
        _artifact_os.kill(int(pid[0]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def _marked_processes(mark: str) -> dict[int, str]:
    """pid -> command line of this user's processes whose environment holds the session's mark."""
    needle = f"{_SESSION_MARK}={mark}".encode()
    found = {}
    for entry in _artifact_os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == _artifact_os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":  # a zombie is dead, only not yet reaped
                    continue
        except OSError:
            continue
        found[int(entry)] = command[:200]
    return found


@_llm_pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    if hasattr(session.config, "workerinput"):  # an xdist process: the controller watches
        return
    import uuid

    mark = uuid.uuid4().hex
    _artifact_os.environ[_SESSION_MARK] = mark
    session.config._envforge_left_behind = (mark, _envforge_temp_folders())


def _check_left_behind(session):
    watched = getattr(session.config, "_envforge_left_behind", None)
    if watched is None:
        return
    import signal
    import time

    mark, before = watched
    deadline = time.monotonic() + 20  # processes a test ended at its last moment are still exiting
    while (alive := _marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.5)
    write = session.config.get_terminal_writer().line
    if alive:
        for pid in alive:
            try:
                _artifact_os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        write("\nerror: processes this test session started were still running at its end (now killed): "
              + "; ".join(f"pid {pid}: {command}" for pid, command in sorted(alive.items())), red=True)
        session.exitstatus = 1
    ours = getattr(session.config, "_envforge_schedule_dir", None)
    left = sorted(p for p in _envforge_temp_folders() - before
                  if p != ours and _artifact_os.path.exists(p) and not _held(p))
    if left:
        ci = _artifact_os.environ.get("CI", "").lower() in ("1", "true")
        write(f"\n{'error' if ci else 'warning'}: envforge temporary folders made during this session were left "
              f"behind: {', '.join(left)}", red=ci, yellow=not ci)
        if ci:
            session.exitstatus = 1
