"""Finished problems in the run store, so a rerun skips them.

Each finished problem is one "bench" run whose config holds its resume key (problem content
hash, coder and result-changing settings, device, compiler fingerprint) with the outcome as a
JSON artifact.  Cancelled problems and harness errors are never stored; a timeout is reused
only when the new time limit is not longer than the one it ran out of.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import HARNESS_ERROR
from kernelstitch.bench.problems import ProblemSpec
from kernelstitch.core.runstore import RunStore

RUN_KIND = "bench"
ARTIFACT_KIND = "report"
ARTIFACT_NAME = "bench_outcome.json"
KEY_FIELD = "bench_key"


def lookup(store: RunStore, key: str, time_limit_s: float,
           earlier: dict[str, ProblemOutcome] | None = None) -> ProblemOutcome | None:
    """The stored outcome for `key`: the run store's, else one from earlier results files."""
    record = store.latest_by_config(RUN_KIND, KEY_FIELD, key, ARTIFACT_KIND)
    if record is not None and isinstance(record.content, dict):
        outcome = ProblemOutcome.from_json(record.content)
    elif earlier and key in earlier:
        outcome = ProblemOutcome.from_json(earlier[key].to_json())
    else:
        return None
    if outcome.status == "timeout" and (outcome.time_limit_s or 0) < time_limit_s:
        return None  # more time now: try again
    outcome.reused = True
    return outcome


class ResultsFileError(ValueError):
    """A --resume-from file is not a bench results.json."""


def load_results(paths: list[Path]) -> dict[str, ProblemOutcome]:
    """Outcomes by resume key from earlier results.json files (later files win).  Problems
    without a key (older reports) or never finished (cancelled, harness errors) are skipped."""
    found: dict[str, ProblemOutcome] = {}
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            problems = data["problems"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ResultsFileError(f"{path}: not a bench results.json ({exc})") from None
        for item in problems:
            outcome = ProblemOutcome.from_json(item)
            if (outcome.resume_key and outcome.status != "cancelled"
                    and not outcome.message.startswith(HARNESS_ERROR)):
                found[outcome.resume_key] = outcome
    return found


def record(store: RunStore, spec: ProblemSpec, key: str, outcome: ProblemOutcome) -> None:
    if outcome.status == "cancelled" or outcome.message.startswith(HARNESS_ERROR):
        return  # not a result of the problem: run it again next time
    run_id = store.start_run(RUN_KIND, str(spec.path), spec.module,
                             {KEY_FIELD: key, "problem": spec.name})
    stored = ProblemOutcome.from_json({**outcome.to_json(), "reused": False})
    store.add_artifact(run_id, ARTIFACT_KIND, ARTIFACT_NAME, stored.to_json())
    store.finish_run(run_id, "succeeded", {"status": outcome.status, "problem": spec.name})


def export_store(source: str | Path, target: str | Path) -> int:
    """Copy the run store's bench results (runs of kind "bench" and their outcomes, nothing
    else: the generate/verify runs hold every candidate's sources, ~60 KB a problem) to a new
    file `target`, which a later run can use as its run store to resume.  Returns how many
    bench runs it holds.  Pending records are merged first; the copy uses sqlite's backup API,
    so it is consistent even while another process writes."""
    source, target = Path(source), Path(target)
    RunStore(source)  # merges pending/ records into the database
    target.unlink(missing_ok=True)
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        conn.execute("DELETE FROM artifacts WHERE run_id IN "
                      "(SELECT id FROM runs WHERE kind != ?)", (RUN_KIND,))
        conn.execute("DELETE FROM runs WHERE kind != ?", (RUN_KIND,))
        conn.execute("VACUUM")
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        conn.close()

