"""The headless watcher (server/watch.py): atomic saves, delete + create, bursts."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from kernelstitch.server.watch import watch_directory

pytestmark = pytest.mark.timeout(30)
DEBOUNCE = 0.3


class Recorder:
    def __init__(self) -> None:
        self.paths: list[Path] = []
        self.event = threading.Condition()

    def __call__(self, path: Path) -> None:
        with self.event:
            self.paths.append(path)
            self.event.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Path]:
        with self.event:
            self.event.wait_for(lambda: len(self.paths) >= count, timeout)
        return list(self.paths)

    def settle(self) -> list[Path]:
        """What was reported once the debounce window has surely passed."""
        time.sleep(DEBOUNCE * 4)
        return list(self.paths)


@pytest.fixture
def watched(tmp_path):
    target = tmp_path / "problem.py"
    target.write_text("x = 1\n")
    recorder = Recorder()
    with watch_directory(tmp_path, recorder, debounce_s=DEBOUNCE) as watch:
        time.sleep(0.1)  # let the observer start
        yield tmp_path.resolve(), target.resolve(), recorder, watch


def test_in_place_burst_reports_once(watched):
    _root, target, recorder, _ = watched
    for i in range(10):
        target.write_text(f"x = {i + 2}\n")
        time.sleep(0.02)
    assert recorder.settle() == [target]


def test_atomic_rename_save_reports_the_target(watched):
    root, target, recorder, _ = watched
    temp = root / ".problem.py.tmp123"
    temp.write_text("x = 42\n")
    os.replace(temp, target)
    assert recorder.wait_for(1) == [target]
    assert recorder.settle() == [target]


def test_delete_then_create_reports_once(watched):
    _root, target, recorder, _ = watched
    target.unlink()
    time.sleep(0.05)
    target.write_text("x = 7\n")
    assert recorder.settle() == [target]


def test_unchanged_content_and_other_files_are_ignored(watched):
    root, target, recorder, _ = watched
    target.write_text("x = 1\n")  # same content as before
    (root / "notes.txt").write_text("hello")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "problem.cpython-311.py").write_text("junk")
    (root / ".#problem.py").write_text("lock")
    assert recorder.settle() == []


def test_each_file_debounced_separately_and_nested(watched):
    root, target, recorder, _ = watched
    nested = root / ".kernelstitch" / "problem.py" / "Model"
    nested.mkdir(parents=True)
    candidate = nested / "model_new.py"
    candidate.write_text("class ModelNew: pass\n")
    target.write_text("x = 3\n")
    assert sorted(recorder.settle()) == sorted([target, candidate.resolve()])


def test_stop_ends_reporting(tmp_path):
    recorder = Recorder()
    watch = watch_directory(tmp_path, recorder, debounce_s=DEBOUNCE)
    (tmp_path / "a.py").write_text("a = 1\n")
    watch.stop()
    (tmp_path / "a.py").write_text("a = 2\n")
    assert recorder.settle() == []


def test_saves_closer_than_the_debounce_still_report_within_the_max_wait(tmp_path):
    """Issue 27: saves under the debounce apart postponed the call without end."""
    target = tmp_path / "problem.py"
    target.write_text("x = 1\n")
    recorder = Recorder()
    with watch_directory(tmp_path, recorder, debounce_s=DEBOUNCE, max_wait_s=3 * DEBOUNCE):
        time.sleep(0.1)
        began = time.monotonic()
        while time.monotonic() - began < 8 * DEBOUNCE:  # a save every DEBOUNCE / 3
            target.write_text(f"x = {time.monotonic()}\n")
            time.sleep(DEBOUNCE / 3)
        seen = recorder.wait_for(2, timeout=2)
    assert len(seen) >= 2  # at least once during the burst, once after it


def test_a_deleted_file_is_reported_to_on_delete(tmp_path):
    target = tmp_path / "problem.py"
    target.write_text("x = 1\n")
    changed, deleted = Recorder(), Recorder()
    with watch_directory(tmp_path, changed, debounce_s=DEBOUNCE, on_delete=deleted):
        time.sleep(0.1)
        target.unlink()
        assert deleted.wait_for(1) == [target.resolve()]
    assert changed.paths == []
