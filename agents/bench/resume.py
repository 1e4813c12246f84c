"""Finished problems in the run store, so a rerun skips them.

Each finished problem is one "bench" run whose config holds its resume key (problem content
hash, coder and result-changing settings, device, compiler fingerprint) with the outcome as a
JSON artifact.  Cancelled problems and harness errors are never stored; a timeout is reused
only when the new time limit is not longer than the one it ran out of.
"""

from __future__ import annotations

from kernelstitch.agents.bench.outcome import ProblemOutcome
from kernelstitch.agents.bench.phases import HARNESS_ERROR
from kernelstitch.agents.bench.problems import ProblemSpec

from kernelstitch.core.runstore import RunStore

RUN_KIND = "bench"
ARTIFACT_KIND = "report"
ARTIFACT_NAME = "bench_outcome.json"
KEY_FIELD = "bench_key"


def lookup(store: RunStore, key: str, time_limit_s: float) -> ProblemOutcome | None:
    record = store.latest_by_config(RUN_KIND, KEY_FIELD, key, ARTIFACT_KIND)
    if record is None or not isinstance(record.content, dict):
        return None
    outcome = ProblemOutcome.from_json(record.content)
    if outcome.status == "timeout" and (outcome.time_limit_s or 0) < time_limit_s:
        return None  # more time now: try again
    outcome.reused = True
    return outcome


def record(store: RunStore, spec: ProblemSpec, key: str, outcome: ProblemOutcome) -> None:
    if outcome.status == "cancelled" or outcome.message.startswith(HARNESS_ERROR):
        return  # not a result of the problem: run it again next time
    run_id = store.start_run(RUN_KIND, str(spec.path), spec.module,
                             {KEY_FIELD: key, "problem": spec.name})
    stored = ProblemOutcome.from_json({**outcome.to_json(), "reused": False})
    store.add_artifact(run_id, ARTIFACT_KIND, ARTIFACT_NAME, stored.to_json())
    store.finish_run(run_id, "succeeded", {"status": outcome.status, "problem": spec.name})
