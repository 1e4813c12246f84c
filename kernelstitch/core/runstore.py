"""The run store: every generate/verify/profile run and what it produced, in one SQLite file.

Several processes (the language server's jobs, the CLI, benchmarks) write to the same store at
once, so: WAL mode (readers never wait for writers), a busy timeout, one short `BEGIN IMMEDIATE`
transaction per write and a fresh connection per operation (nothing held between calls).

Results are never lost: when a write cannot be committed (the database stays locked past the
timeout, the disk is read-only, the file is damaged) the record goes to a JSON file under
`<store dir>/pending/` and the next successful open merges it.  A run started that way gets a
negative id, which later writes and `get_run` resolve after the merge.

Sizes are bounded (one runaway text, e.g. a model's reply, must not grow the store without
limit): a text artifact keeps its first MAX_TEXT_CHARS, each string inside a JSON artifact its
first MAX_JSON_STRING_CHARS, a whole JSON artifact MAX_JSON_CHARS; a run's config and summary
MAX_RUN_STRING_CHARS per string and MAX_RUN_JSON_CHARS in all.  A cut says so where it happens
("[truncated: N chars, kept the first M]").

Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from kernelstitch.core.workspace import write_text_atomic

SCHEMA_VERSION = 1
# delivered_file: how the pipeline trusted a file it delivered (built-in, or an LLM file's
# allowance), by the file's content hash (agents/pipeline.py)
RUN_KINDS = ("generate", "verify", "profile", "bench", "watch", "search", "delivered_file")
ARTIFACT_KINDS = ("plan", "candidate", "verdict", "profile", "report", "log", "prompt",
                  "selection", "delivered_file")
PENDING_DIR = "pending"
MAX_TEXT_CHARS = 1_000_000  # a text artifact (a candidate file, a report)
MAX_JSON_STRING_CHARS = 200_000  # one string inside a JSON artifact
MAX_JSON_CHARS = 2_000_000  # a whole JSON artifact, after its strings were bounded
MAX_RUN_STRING_CHARS = 20_000  # one string inside a run's config or summary
MAX_RUN_JSON_CHARS = 100_000  # a run's config or summary

_log = logging.getLogger("kernelstitch.runstore")
T = TypeVar("T")

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL,
    source_path TEXT NOT NULL,
    module TEXT,
    status TEXT NOT NULL,
    config TEXT NOT NULL DEFAULT '{}',
    finished_at TEXT,
    summary TEXT,
    pending_key TEXT UNIQUE  -- set when the run came from a pending file
);
CREATE INDEX IF NOT EXISTS runs_by_target ON runs (source_path, module, kind, id);
CREATE TABLE IF NOT EXISTS artifacts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs (id),
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    content TEXT NOT NULL,
    content_type TEXT NOT NULL CHECK (content_type IN ('text', 'json')),
    sha256 TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS artifacts_by_run ON artifacts (run_id, kind, id);
CREATE TABLE IF NOT EXISTS applied_pending (
    key TEXT PRIMARY KEY,  -- a merged pending record: merging twice is a no-op
    applied_at TEXT NOT NULL
);
"""
# MIGRATIONS[v] brings a database at version v to v + 1.
MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1}


class RunStoreError(Exception):
    """The run store cannot be used; the message names the file and what to do."""


class _Unresolved(Exception):
    """A pending run id whose run is not in the database yet."""


@dataclass(frozen=True)
class RunRecord:
    id: int
    created_at: str  # ISO 8601, UTC
    kind: str
    source_path: str
    module: str | None
    status: str  # "running" until finish_run
    config: dict[str, Any]
    finished_at: str | None
    summary: dict[str, Any] | None


@dataclass(frozen=True)
class ArtifactRecord:
    id: int
    run_id: int
    kind: str
    name: str
    content: Any  # str for text artifacts, the decoded value for JSON ones
    is_json: bool
    sha256: str  # of the stored text
    created_at: str

    @property
    def text(self) -> str:
        return json.dumps(self.content, indent=2) if self.is_json else self.content


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def clip_text(text: str, limit: int) -> str:
    """`text`, or its first `limit` chars and a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [truncated: {len(text):,} chars, kept the first {limit:,}]"


def _clip_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return clip_text(value, limit)
    if isinstance(value, dict):
        return {k: _clip_strings(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip_strings(v, limit) for v in value]
    return value


def _bounded_json(value: Any, string_limit: int, limit: int) -> str:
    """`value` as JSON with every string bounded; still too long (many small parts), it is
    kept as the start of its JSON text, in an object that says so."""
    text = _json(_clip_strings(value, string_limit))
    if len(text) <= limit:
        return text
    return _json({"truncated": f"[truncated: {len(text):,} chars of JSON, kept the first "
                               f"{limit:,} as text]", "head": text[:limit]})


def _pending_key(run_id: int) -> str:
    return f"pending-run:{-run_id}"


def _is_locked(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class RunStore:
    """See the module docstring.  Cheap to create; holds no connection between calls."""

    def __init__(self, path: str | os.PathLike[str], timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.pending_dir = self.path.parent / PENDING_DIR
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(
                f"cannot create the folder of the run store {self.path}: {exc}") from exc
        self._open()
        self.merge_pending()

    # ---------------------------------------------------------------------------------------
    # opening and errors

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
        conn.row_factory = sqlite3.Row
        return conn

    def _error(self, exc: sqlite3.Error, doing: str) -> RunStoreError:
        if _is_locked(exc):
            return RunStoreError(
                f"run store {self.path} stayed locked for more than {self.timeout_s:g} s while "
                f"{doing}: another process holds it; retry, or stop the other KernelStitch "
                "processes using this workspace"
            )
        if "unable to open" in str(exc).lower():
            return RunStoreError(
                f"run store {self.path} cannot be opened while {doing} ({exc}): check that "
                "the folder exists and is writable"
            )
        return RunStoreError(
            f"run store {self.path} cannot be used while {doing} ({exc}): the file is damaged "
            f"or not a database. Move it aside (e.g. rename it to {self.path.name}.broken) and "
            "a new, empty store will be created; KernelStitch never overwrites it"
        )

    def _open(self) -> None:
        """WAL mode and the current schema; retries while other processes hold the lock."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                conn = self._connect()
                try:
                    self._prepare(conn)
                finally:
                    conn.close()
                return
            except sqlite3.Error as exc:
                if _is_locked(exc) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise self._error(exc, "opening it") from exc

    def _prepare(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # fails on a non-database
        self._check_version(version)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process?
            self._check_version(version)
            while version < SCHEMA_VERSION:
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        conn.execute(statement)
                version += 1
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise RunStoreError(
                f"run store {self.path} has schema version {version}, newer than this "
                f"KernelStitch understands ({SCHEMA_VERSION}): upgrade KernelStitch, or move "
                "the file aside to start a new store"
            )

    # ---------------------------------------------------------------------------------------
    # reads

    def _read(self, doing: str, query: Callable[[sqlite3.Connection], T]) -> T:
        try:
            conn = self._connect()
            try:
                return query(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise self._error(exc, doing) from exc

    def get_run(self, run_id: int) -> RunRecord | None:
        """The run, also for a negative (pending) id once its record was merged."""
        column, value = ("pending_key", _pending_key(run_id)) if run_id < 0 else ("id", run_id)
        row = self._read(
            f"reading run {run_id}",
            lambda c: c.execute(f"SELECT * FROM runs WHERE {column} = ?", (value,)).fetchone(),
        )
        return _run_record(row) if row else None

    def list_runs(
        self,
        source_path: str | os.PathLike[str] | None = None,
        module: str | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        """Newest first."""
        clauses, params = [], []
        for column, value in (("source_path", source_path), ("module", module), ("kind", kind)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(str(value))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT * FROM runs {where} ORDER BY id DESC LIMIT ?"
        rows = self._read("listing runs", lambda c: c.execute(sql, (*params, limit)).fetchall())
        return [_run_record(row) for row in rows]

    def artifacts(self, run_id: int, kind: str | None = None) -> list[ArtifactRecord]:
        """In the order they were added."""
        run_id = self._real_id_for_read(run_id)
        sql, params = "SELECT * FROM artifacts WHERE run_id = ?", [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = self._read(
            f"reading artifacts of run {run_id}",
            lambda c: c.execute(sql + " ORDER BY id", params).fetchall(),
        )
        return [_artifact_record(row) for row in rows]

    def latest(
        self,
        kind: str,
        source_path: str | os.PathLike[str],
        module: str | None,
        artifact_kind: str,
        status: str | None = None,
    ) -> ArtifactRecord | None:
        """The newest `artifact_kind` artifact of a `kind` run on this module (any status)."""
        sql = (
            "SELECT a.* FROM artifacts a JOIN runs r ON a.run_id = r.id "
            "WHERE r.kind = ? AND r.source_path = ? AND r.module IS ? AND a.kind = ?"
        )
        params: list[Any] = [kind, str(source_path), module, artifact_kind]
        if status is not None:
            sql += " AND r.status = ?"
            params.append(status)
        sql += " ORDER BY r.id DESC, a.id DESC LIMIT 1"
        row = self._read("finding the latest artifact", lambda c: c.execute(sql, params).fetchone())
        return _artifact_record(row) if row else None

    def latest_by_config(
        self,
        kind: str,
        config_key: str,
        value: str,
        artifact_kind: str,
        status: str | None = "succeeded",
    ) -> ArtifactRecord | None:
        """The newest `artifact_kind` artifact of a `kind` run whose config[config_key] is
        `value` (e.g. the bench's resume key), from runs with `status` (None: any)."""
        sql = (
            "SELECT a.* FROM artifacts a JOIN runs r ON a.run_id = r.id "
            "WHERE r.kind = ? AND json_extract(r.config, '$.' || ?) = ? AND a.kind = ?"
        )
        params: list[Any] = [kind, config_key, value, artifact_kind]
        if status is not None:
            sql += " AND r.status = ?"
            params.append(status)
        sql += " ORDER BY r.id DESC, a.id DESC LIMIT 1"
        row = self._read("finding an artifact by config",
                         lambda c: c.execute(sql, params).fetchone())
        return _artifact_record(row) if row else None

    def _real_id_for_read(self, run_id: int) -> int:
        if run_id >= 0:
            return run_id
        run = self.get_run(run_id)
        return run.id if run else run_id  # unmerged: matches nothing

    # ---------------------------------------------------------------------------------------
    # writes

    def start_run(
        self,
        kind: str,
        source_path: str | os.PathLike[str],
        module: str | None,
        config: dict[str, Any] | None = None,
    ) -> int:
        """A new run with status "running"; its id (negative when it went to pending/)."""
        _check_kind("run", kind, RUN_KINDS)
        record = {
            "op": "start_run",
            "kind": kind,
            "source_path": str(source_path),
            "module": module,
            "config": _bounded_json(config or {}, MAX_RUN_STRING_CHARS, MAX_RUN_JSON_CHARS),
            "created_at": _now(),
        }
        run_id = self._write(record, lambda conn: _insert_run(conn, record, None))
        if run_id is not None:
            return run_id
        pending_id = -(secrets.randbits(52) | 1)
        self._save_pending({**record, "pending_key": _pending_key(pending_id)})
        return pending_id

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None = None) -> None:
        if not status:
            raise ValueError("finish_run needs a status such as 'succeeded' or 'failed'")
        record = {
            "op": "finish_run",
            "run_id": run_id,
            "status": status,
            "summary": _bounded_json(summary or {}, MAX_RUN_STRING_CHARS, MAX_RUN_JSON_CHARS),
            "finished_at": _now(),
        }
        if self._write(record, lambda conn: _finish_run(conn, record)) is None:
            self._save_pending(record)

    def add_artifact(
        self, run_id: int, kind: str, name: str, content: str | dict[str, Any] | list[Any]
    ) -> int:
        """Store text as is and anything else as JSON, both bounded (see the module docstring);
        the artifact id (-1 when pending)."""
        _check_kind("artifact", kind, ARTIFACT_KINDS)
        is_json = not isinstance(content, str)
        text = (_bounded_json(content, MAX_JSON_STRING_CHARS, MAX_JSON_CHARS) if is_json
                else clip_text(content, MAX_TEXT_CHARS))
        record = {
            "op": "add_artifact",
            "run_id": run_id,
            "kind": kind,
            "name": name,
            "content": text,
            "content_type": "json" if is_json else "text",
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "created_at": _now(),
        }
        artifact_id = self._write(record, lambda conn: _insert_artifact(conn, record))
        if artifact_id is None:
            self._save_pending(record)
            return -1
        return artifact_id

    def _write(self, record: dict[str, Any], apply: Callable[[sqlite3.Connection], T]) -> T | None:
        """Apply in one short transaction; None when it could not be committed."""
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            _log.warning("run store %s: cannot connect (%s); saving to pending/", self.path, exc)
            return None
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = apply(conn)
                conn.execute("COMMIT")
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except _Unresolved:
            return None  # a pending run not merged yet: this record waits with it
        except sqlite3.Error as exc:
            _log.warning(
                "run store %s: %s not committed (%s); saving it to %s",
                self.path, record["op"], exc, self.pending_dir,
            )
            return None
        finally:
            conn.close()

    def _save_pending(self, record: dict[str, Any]) -> Path:
        record = {**record, "key": uuid.uuid4().hex}
        name = f"{time.time_ns():020d}-{os.getpid()}-{record['key'][:12]}.json"
        target = self.pending_dir / name
        try:
            write_text_atomic(target, json.dumps(record))
        except OSError as exc:
            raise RunStoreError(
                f"run store {self.path}: a {record['op']} record could be written neither to "
                f"the database nor to {self.pending_dir} ({exc}); check permissions and free "
                "disk space"
            ) from exc
        return target

    # ---------------------------------------------------------------------------------------
    # pending records

    def pending_files(self) -> list[Path]:
        """Records waiting to be merged, oldest first."""
        if not self.pending_dir.is_dir():
            return []
        return sorted(self.pending_dir.glob("*.json"))

    def merge_pending(self) -> int:
        """Merge pending/ records into the database; how many were merged.

        Runs in one transaction under the write lock, and each record's key is stored, so two
        processes merging at once never apply a record twice.  A record that cannot be applied
        yet (a damaged file, a run not merged yet) stays where it is.
        """
        files = self.pending_files()
        if not files:
            return 0
        try:
            conn = self._connect()
        except sqlite3.Error:
            return 0
        merged: list[Path] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for path in files:
                if self._merge_one(conn, path):
                    merged.append(path)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            _log.warning("run store %s: pending records not merged yet (%s)", self.path, exc)
            return 0
        finally:
            conn.close()
        for path in merged:
            path.unlink(missing_ok=True)
        return len(merged)

    def _merge_one(self, conn: sqlite3.Connection, path: Path) -> bool:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            key = record["key"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _log.warning("run store %s: skipping unreadable pending record %s (%s)",
                         self.path, path, exc)
            return False
        if conn.execute("SELECT 1 FROM applied_pending WHERE key = ?", (key,)).fetchone():
            return True  # merged by another process that has not deleted the file yet
        conn.execute("SAVEPOINT record")
        try:
            op = record["op"]
            if op == "start_run":
                _insert_run(conn, record, record["pending_key"])
            elif op == "finish_run":
                _finish_run(conn, record)
            elif op == "add_artifact":
                _insert_artifact(conn, record)
            else:
                raise ValueError(f"unknown operation {op!r}")
            conn.execute("INSERT INTO applied_pending (key, applied_at) VALUES (?, ?)",
                         (key, _now()))
        except (_Unresolved, KeyError, ValueError, sqlite3.IntegrityError) as exc:
            conn.execute("ROLLBACK TO record")
            conn.execute("RELEASE record")
            _log.warning("run store %s: pending record %s kept for later (%r)",
                         self.path, path, exc)
            return False
        conn.execute("RELEASE record")
        return True


# --------------------------------------------------------------------------------------------
# row helpers (inside a transaction)


def _check_kind(what: str, kind: str, allowed: tuple[str, ...]) -> None:
    if kind not in allowed:
        raise ValueError(f"unknown {what} kind {kind!r}; expected one of {', '.join(allowed)}")


def _resolve_run_id(conn: sqlite3.Connection, run_id: int) -> int:
    if run_id >= 0:
        return run_id
    row = conn.execute(
        "SELECT id FROM runs WHERE pending_key = ?", (_pending_key(run_id),)
    ).fetchone()
    if row is None:
        raise _Unresolved(run_id)
    return row[0]


def _insert_run(conn: sqlite3.Connection, record: dict[str, Any], pending_key: str | None) -> int:
    cursor = conn.execute(
        "INSERT INTO runs (created_at, kind, source_path, module, status, config, pending_key) "
        "VALUES (?, ?, ?, ?, 'running', ?, ?)",
        (record["created_at"], record["kind"], record["source_path"], record["module"],
         record["config"], pending_key),
    )
    return int(cursor.lastrowid)


def _finish_run(conn: sqlite3.Connection, record: dict[str, Any]) -> bool:
    conn.execute(
        "UPDATE runs SET status = ?, summary = ?, finished_at = ? WHERE id = ?",
        (record["status"], record["summary"], record["finished_at"],
         _resolve_run_id(conn, record["run_id"])),
    )
    return True


def _insert_artifact(conn: sqlite3.Connection, record: dict[str, Any]) -> int:
    cursor = conn.execute(
        "INSERT INTO artifacts (run_id, kind, name, content, content_type, sha256, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (_resolve_run_id(conn, record["run_id"]), record["kind"], record["name"],
         record["content"], record["content_type"], record["sha256"], record["created_at"]),
    )
    return int(cursor.lastrowid)


def _run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        created_at=row["created_at"],
        kind=row["kind"],
        source_path=row["source_path"],
        module=row["module"],
        status=row["status"],
        config=json.loads(row["config"] or "{}"),
        finished_at=row["finished_at"],
        summary=json.loads(row["summary"]) if row["summary"] is not None else None,
    )


def _artifact_record(row: sqlite3.Row) -> ArtifactRecord:
    is_json = row["content_type"] == "json"
    return ArtifactRecord(
        id=row["id"],
        run_id=row["run_id"],
        kind=row["kind"],
        name=row["name"],
        content=json.loads(row["content"]) if is_json else row["content"],
        is_json=is_json,
        sha256=row["sha256"],
        created_at=row["created_at"],
    )
