"""Results of earlier runs, read back from the workspace's run store (after a restart, and for
what a job result does not carry, such as a profile's kernel table).

Job processes write the store (kernelstitch.core.runstore, SQLite in WAL mode, so reading never
waits for them); the server only reads, and only a store that already exists.  Every access is
guarded: a missing store, an older schema or an unexpected shape means "nothing known", never
an error in a hover.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kernelstitch.server.layout import runstore_file

log = logging.getLogger(__name__)
_KINDS = ("generate", "verify", "profile")


@dataclass(frozen=True)
class PersistedRun:
    kind: str
    run_id: int
    finished_at: float | None  # epoch seconds
    plan: dict[str, Any] | None
    verdict: dict[str, Any] | None
    profile: dict[str, Any] | None  # a ProfileReport dict: kernels and findings


def _store(root: Path) -> Any | None:
    path = runstore_file(root)
    if path is None:
        return None
    try:
        from kernelstitch.core.runstore import RunStore

        return RunStore(path, timeout_s=1.0)
    except Exception as exc:  # noqa: BLE001 - damaged, newer schema, locked past the timeout
        log.info("run store %s not readable: %s", path, exc)
        return None


def latest_runs(root: Path, source: Path, module: str) -> list[PersistedRun]:
    """The newest successful run of each kind for a module, oldest first."""
    store = _store(root)
    if store is None:
        return []
    runs = []
    for kind in _KINDS:
        try:
            records = store.list_runs(source_path=str(source), module=module, kind=kind,
                                      limit=10)
            record = next((r for r in records if r.status == "succeeded"), None)
            if record is not None:
                runs.append(_read_run(store, kind, record))
        except Exception as exc:  # noqa: BLE001 - schema drift: skip this kind
            log.info("run store read failed (%s %s): %s", kind, module, exc)
    runs.sort(key=lambda r: r.finished_at or 0.0)
    return runs


def profile_of_run(root: Path, run_id: int | None) -> dict[str, Any] | None:
    """The ProfileReport dict a profile job stored (its result carries only the findings)."""
    if run_id is None:
        return None
    store = _store(root)
    if store is None:
        return None
    try:
        artifacts = store.artifacts(run_id, "profile")
    except Exception as exc:  # noqa: BLE001 - any failure: nothing known
        log.info("run store read failed (run %s): %s", run_id, exc)
        return None
    content = artifacts[-1].content if artifacts else None
    return content if isinstance(content, dict) else None


def _read_run(store: Any, kind: str, record: Any) -> PersistedRun:
    by_kind: dict[str, Any] = {}
    for artifact in store.artifacts(record.id):
        by_kind[artifact.kind] = artifact.content  # later artifacts of a kind win
    return PersistedRun(
        kind=kind,
        run_id=record.id,
        finished_at=_epoch(record.finished_at),
        plan=_dict(by_kind.get("plan")),
        verdict=_dict(by_kind.get("verdict")),
        profile=_dict(by_kind.get("profile")),
    )


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None
