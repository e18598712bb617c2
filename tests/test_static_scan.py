"""The static scan is safe when threads run it at once (issue 23 item 2): generate scans themes in
threads, and CPython 3.11's AST constructor keeps its recursion depth in interpreter-wide state."""
from __future__ import annotations

import gc
import shutil
import sys
import threading
import time
from pathlib import Path

from envforge.pipeline.check import static

REFERENCE = Path(__file__).resolve().parents[1] / "generated_envs" / "reference"


class _SwitchesThreads:
    """Cyclic garbage whose finalizer lets another thread run: a collection that starts inside
    one thread's parse hands the interpreter to the next thread mid-parse."""

    def __init__(self):
        self.me = self

    def __del__(self):
        time.sleep(0)


def test_many_env_folders_scanned_in_threads_at_once_give_no_internal_error(tmp_path):
    folders = []
    for i in range(6):
        for name in ("crate_dock", "tide_pool"):
            folder = tmp_path / f"{name}_{i}"
            shutil.copytree(REFERENCE / name, folder)
            folders.append(folder)
    expected = {f.name: static.scan_env(f) for f in folders}
    found: dict[str, list] = {}
    errors: list[BaseException] = []

    def scan(folder: Path) -> None:
        try:
            for _ in range(4):
                _SwitchesThreads()
                found[folder.name] = static.scan_env(folder)
        except BaseException as e:  # noqa: BLE001 - what the test is looking for
            errors.append(e)

    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(50, 1, 1)
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=scan, args=(f,)) for f in folders]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
    assert errors == []
    assert found == expected
