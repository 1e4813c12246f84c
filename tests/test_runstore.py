"""The SQLite run store: concurrency, reopening, damaged files, and nothing lost when locked."""

from __future__ import annotations

import hashlib
import multiprocessing
import sqlite3

import pytest

from kernelstitch.core.runstore import SCHEMA_VERSION, RunStore, RunStoreError


def test_runs_and_artifacts_round_trip(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    run_id = store.start_run("generate", "/src/a.py", "Model", {"seeds": 3, "device": None})
    assert run_id > 0
    run = store.get_run(run_id)
    assert (run.kind, run.source_path, run.module, run.status) == (
        "generate", "/src/a.py", "Model", "running")
    assert run.config == {"seeds": 3, "device": None} and run.finished_at is None

    plan_id = store.add_artifact(run_id, "plan", "plan.json", {"steps": [1, 2]})
    store.add_artifact(run_id, "candidate", "model_new.py", "class ModelNew: ...\n")
    store.finish_run(run_id, "succeeded", {"message": "accepted"})

    run = store.get_run(run_id)
    assert run.status == "succeeded" and run.summary == {"message": "accepted"}
    assert run.finished_at >= run.created_at
    artifacts = store.artifacts(run_id)
    assert [a.kind for a in artifacts] == ["plan", "candidate"]
    assert artifacts[0].id == plan_id and artifacts[0].content == {"steps": [1, 2]}
    assert artifacts[0].is_json and not artifacts[1].is_json
    assert artifacts[1].content == "class ModelNew: ...\n"
    assert artifacts[1].sha256 == hashlib.sha256(b"class ModelNew: ...\n").hexdigest()
    assert store.artifacts(run_id, kind="plan") == artifacts[:1]


def test_list_and_latest(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    first = store.start_run("generate", "/a.py", "Model", {})
    store.add_artifact(first, "report", "report.md", "old")
    store.start_run("verify", "/a.py", "Model", {})
    other = store.start_run("generate", "/b.py", "Other", {})
    second = store.start_run("generate", "/a.py", "Model", {})
    store.add_artifact(second, "report", "report.md", "new")
    store.finish_run(first, "succeeded", {})
    store.finish_run(second, "failed", {})

    assert [r.id for r in store.list_runs()] == [second, other, first + 1, first]
    assert [r.id for r in store.list_runs(source_path="/a.py", kind="generate")] == [
        second, first]
    assert [r.id for r in store.list_runs(module="Other")] == [other]
    assert len(store.list_runs(limit=2)) == 2
    assert store.latest("generate", "/a.py", "Model", "report").content == "new"
    assert store.latest("generate", "/a.py", "Model", "report", status="succeeded").content == (
        "old")
    assert store.latest("generate", "/b.py", "Other", "report") is None


def test_bad_kinds_are_rejected(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    with pytest.raises(ValueError, match="unknown run kind"):
        store.start_run("compile", "/a.py", "Model", {})
    run_id = store.start_run("generate", "/a.py", "Model", {})
    with pytest.raises(ValueError, match="unknown artifact kind"):
        store.add_artifact(run_id, "binary", "x", "y")


def test_reopen_keeps_everything_and_uses_wal(tmp_path):
    path = tmp_path / "runs.sqlite"
    run_id = RunStore(path).start_run("profile", "/a.py", "Model", {"k": 1})
    reopened = RunStore(path)
    assert reopened.get_run(run_id).config == {"k": 1}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def _write_runs(path: str, writer: int, count: int) -> None:
    store = RunStore(path, timeout_s=30)
    for i in range(count):
        run_id = store.start_run("bench", f"/w{writer}.py", "Model", {"i": i})
        store.add_artifact(run_id, "log", "log.txt", f"writer {writer} run {i}")
        store.finish_run(run_id, "succeeded", {"i": i})


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "runs.sqlite"
    writers, count = 4, 40
    ctx = multiprocessing.get_context("spawn")
    processes = [ctx.Process(target=_write_runs, args=(str(path), w, count))
                 for w in range(writers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
        assert p.exitcode == 0
    store = RunStore(path)
    assert not store.pending_files()  # everything was committed directly
    runs = store.list_runs(limit=10_000)
    assert len(runs) == writers * count
    assert len({r.id for r in runs}) == writers * count
    for w in range(writers):
        mine = store.list_runs(source_path=f"/w{w}.py", limit=10_000)
        assert sorted(r.config["i"] for r in mine) == list(range(count))
        assert all(r.status == "succeeded" for r in mine)
        assert all(len(store.artifacts(r.id, "log")) == 1 for r in mine)


def test_corrupt_file_is_a_clear_error_and_untouched(tmp_path):
    path = tmp_path / "runs.sqlite"
    garbage = b"this is not an sqlite database \x00\xff" * 200
    path.write_bytes(garbage)
    with pytest.raises(RunStoreError) as info:
        RunStore(path)
    message = str(info.value)
    assert str(path) in message and "move it aside" in message.lower()
    assert path.read_bytes() == garbage


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RunStoreError, match="newer"):
        RunStore(path)


def test_locked_database_goes_to_pending_and_merges_later(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = RunStore(path, timeout_s=0.2)
    committed = store.start_run("generate", "/a.py", "Model", {})

    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock, as a stuck process would
    try:
        run_id = store.start_run("generate", "/a.py", "Model", {"seeds": 2})
        assert run_id < 0  # a pending run
        assert store.add_artifact(run_id, "plan", "plan.json", {"steps": []}) == -1
        store.add_artifact(committed, "log", "log.txt", "written while locked")
        store.finish_run(run_id, "succeeded", {"message": "done"})
        assert len(store.pending_files()) == 4
        assert store.get_run(run_id) is None  # reads work (WAL), the run is not there yet
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    reopened = RunStore(path)  # the next successful open merges
    assert not reopened.pending_files()
    merged = reopened.get_run(run_id)
    assert merged is not None and merged.id > committed
    assert (merged.status, merged.summary, merged.config) == (
        "succeeded", {"message": "done"}, {"seeds": 2})
    assert [a.content for a in reopened.artifacts(merged.id)] == [{"steps": []}]
    assert [a.content for a in reopened.artifacts(run_id)] == [{"steps": []}]
    assert [a.content for a in reopened.artifacts(committed)] == ["written while locked"]
    assert reopened.merge_pending() == 0  # nothing applied twice
    assert len(reopened.list_runs()) == 2


def test_reads_on_a_locked_database_raise_a_clear_error(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = RunStore(path, timeout_s=0.2)
    store.start_run("generate", "/a.py", "Model", {})
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("PRAGMA locking_mode = EXCLUSIVE")
    blocker.execute("BEGIN EXCLUSIVE")
    blocker.execute("UPDATE runs SET status = 'x'")
    try:
        with pytest.raises(RunStoreError, match="locked"):
            store.list_runs()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_merge_is_idempotent_when_files_linger(tmp_path):
    """A merger that committed but died before deleting its files applies nothing twice."""
    path = tmp_path / "runs.sqlite"
    store = RunStore(path, timeout_s=0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    run_id = store.start_run("watch", "/a.py", "Model", {})
    blocker.execute("ROLLBACK")
    blocker.close()
    pending = store.pending_files()
    kept = {p: p.read_bytes() for p in pending}
    assert store.merge_pending() == 1
    for p, data in kept.items():  # as if the unlink never happened
        p.write_bytes(data)
    assert store.merge_pending() == 1  # recognised as applied, file removed
    assert len(store.list_runs()) == 1 and store.get_run(run_id) is not None
    assert not store.pending_files()


def test_unreadable_pending_file_is_kept(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    (tmp_path / "pending").mkdir(exist_ok=True)
    broken = tmp_path / "pending" / "00000000000000000001-1-broken.json"
    broken.write_text("{not json")
    assert store.merge_pending() == 0
    assert broken.exists()  # never deleted: someone can still recover it
