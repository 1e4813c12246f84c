"""The candidate cannot change what it is judged against (torch-free; used by api.py).

`Protection.begin`, before any candidate code runs (its import included):
* snapshots the reference and its local imports (snapshot.py): both workers load that private,
  read-only copy, never the user's file;
* hashes the verifier's own source (the verifier package and kernelstitch.core) and the user's
  files that matter (every .py file of the reference's folder, the candidate file).
`candidate_worker_options` is the candidate worker's sandbox: writes only beneath a private
folder of the verification (its cwd, TMPDIR and private Triton/Inductor/CUDA caches), the
compile caches it builds into (TORCH_EXTENSIONS_DIR's root, KS_EXTENSIONS_DIR's) and /dev, by
Landlock where the kernel has it (kernelstitch.core.sandbox); an environment without
credentials; no TCP.
`finish`, after every worker exited, rejects whatever else happened:
* `reference_modified`: the user's reference (or a file it imports) or the snapshot changed;
* `verifier_modified`: the verifier's source changed;
* `workspace_modified`: a watched file of the user's changed or a .py file appeared, where no
  write guard was enforced (with the guard, the candidate had no write access: a note);
* `writes_outside_sandbox`: the candidate's process tried to write outside its sandbox (its
  audit log; refused where the guard is enforced);
* `judge_bypassed`: the candidate's process reported a check as passed that the judge (the
  reference worker, out of its reach) never compared clean.
The verdict records the reference's sha256 as snapshotted, the verifier's, and the write guard.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from kernelstitch.agents.verifier.precision_report import precision_report
from kernelstitch.agents.verifier.runner import (
    JUDGE_LEDGER_TASK,
    StartedWorker,
    TaskOutcome,
    run_task,
)
from kernelstitch.agents.verifier.snapshot import (
    SnapshotError,
    remove_snapshot,
    rewatch,
    take_reference_snapshot,
    verifier_manifest,
    watch_workspace,
)
from kernelstitch.agents.verifier.verdict import TIMING_SETTINGS_CHECK, Reason, Verdict

from kernelstitch.core.sandbox import GuardStatus, landlock_abi

SANDBOX_DIR = "candidate"
LEDGER_TIMEOUT_S = 30.0
LISTED = 5  # file names a reason lists

__all__ = ["Protection", "SnapshotError", "compile_cache_roots"]


def _cache_home(environ) -> str:
    return environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def compile_cache_roots(environ=None) -> list[str]:
    """The folders candidates compile into, as torch's cpp_extension and the built-in coder's
    wrapper compute them (an explicit variable, else the user's cache folder)."""
    environ = os.environ if environ is None else environ
    return [environ.get("TORCH_EXTENSIONS_DIR")
            or os.path.join(_cache_home(environ), "torch_extensions"),
            environ.get("KS_EXTENSIONS_DIR")
            or os.path.join(_cache_home(environ), "kernelstitch", "extensions")]


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - LISTED} more" if len(items) > LISTED else ""
    return ", ".join(items[:LISTED]) + more


def _inside(path: str, folder: str) -> bool:
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/")


class Protection:
    """One verification's snapshot, hashes and candidate sandbox; see the module docstring."""

    def __init__(self, reference: Path, candidate: Path, secret_env: tuple[str, ...] = ()):
        self.reference, self.candidate = Path(reference).resolve(), Path(candidate).resolve()
        self.secret_env = tuple(secret_env)
        self.verifier_before = verifier_manifest()
        self._dir = tempfile.mkdtemp(prefix="ks_snapshot_")
        try:
            self.snapshot = take_reference_snapshot(self.reference, Path(self._dir))
        except BaseException:
            self.close()
            raise
        self.workspace = watch_workspace(self.reference, self.candidate)
        self.clients: list[Any] = []  # candidate WorkerClients (their readiness lines)
        self.candidate_results: list[dict[str, Any] | None] = []  # its phases' raw results
        self.ledger: list[dict[str, Any]] | None = None  # the judge's comparisons
        self.ledger_error: str | None = None

    @classmethod
    def begin(cls, reference: Path, candidate: Path,
              secret_env: tuple[str, ...] = ()) -> Protection:
        """Raises SnapshotError when the reference cannot be snapshotted."""
        return cls(reference, candidate, secret_env)

    @property
    def import_fallback(self) -> str:
        return str(self.reference.parent)

    def candidate_worker_options(self, work_dir: str) -> dict[str, Any]:
        """WorkerClient keywords of a candidate worker (runner.StartedWorker)."""
        private = Path(work_dir) / SANDBOX_DIR
        # (names no import can take for a package: `python -m` puts the cwd on sys.path)
        folders = {name: private / f"{name}-cache" for name in ("tmp", "triton", "inductor",
                                                                 "nv")}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        env = {"TMPDIR": str(folders["tmp"]), "TMP": str(folders["tmp"]),
               "TEMP": str(folders["tmp"]), "TRITON_CACHE_DIR": str(folders["triton"]),
               "TORCHINDUCTOR_CACHE_DIR": str(folders["inductor"]),
               "CUDA_CACHE_PATH": str(folders["nv"]), "PYTHONDONTWRITEBYTECODE": "1"}
        return {"env": env, "write_guard": (str(private), *compile_cache_roots(), "/dev"),
                "scrub_env": True, "secret_env_names": self.secret_env, "cwd": str(private)}

    def watch(self, client: Any) -> None:
        self.clients.append(client)

    def record_candidate(self, *outcomes: TaskOutcome | None) -> None:
        self.candidate_results = [o.result for o in outcomes if o is not None and o.ok]

    def read_ledger(self, judge: StartedWorker, device: int | None) -> None:
        """The judge's own record of its comparisons (reference_task.judge_ledger)."""
        outcome = run_task(JUDGE_LEDGER_TASK, {}, LEDGER_TIMEOUT_S, device, None, judge,
                           keep_open=True)
        if outcome.ok and isinstance((outcome.result or {}).get("entries"), list):
            self.ledger = outcome.result["entries"]
        else:
            self.ledger_error = ("the judge's record of its comparisons could not be read "
                                 f"({outcome.error_kind}): {outcome.error_message[:300]}")

    def guard_status(self) -> GuardStatus | None:
        """The candidate workers' guard as they reported it (the weakest), None if none
        started."""
        found = [GuardStatus.from_json((c.hello or {}).get("guard")) for c in self.clients
                 if getattr(c, "hello", None)]
        found = [g for g in found if g is not None]
        if not found:
            return None
        weak = [g for g in found if not g.enforced]
        return weak[0] if weak else found[-1]

    def _guard_text(self, status: GuardStatus | None) -> str:
        if status is not None:
            text = status.describe()
            exposed = self._exposed(status)
            if status.enforced and exposed:
                text += (f" (but {exposed} is writable for compile caches and holds the "
                         "workspace: detection by hashing too)")
            return text
        abi, why = landlock_abi()
        return (f"write guard: landlock ABI v{abi} (no candidate code ran)" if abi
                else f"write guard: unavailable ({why}), detection by hashing")

    def _exposed(self, status: GuardStatus) -> str | None:
        """An allowed folder that holds the reference's folder or the candidate (a compile
        cache pointed at the workspace)."""
        watched = [str(self.reference.parent), str(self.candidate)]
        return next((folder for folder in status.allowed if folder != "/dev"
                     and any(_inside(os.path.realpath(w), folder) for w in watched)), None)

    # ----------------------------------------------------------------------------------------

    def finish(self, verdict: Verdict) -> Verdict:
        """The verdict with what the run could have changed checked, and recorded; call it
        after every worker of the verification exited."""
        candidate_results = self.candidate_results
        status = self.guard_status()
        guarded = status is not None and status.enforced and not self._exposed(status)
        reasons: list[Reason] = []
        notes: list[str] = []
        sha = self.snapshot.sha256
        changed = self.snapshot.changed_sources()
        if changed:
            reasons.append(Reason(
                "reference_modified", f"the reference changed during verification: "
                f"{_listed(changed)} (the candidate was judged against the snapshot taken "
                f"before, reference sha256 {sha[:16]}); restore it and verify again",
                detail={"files": changed, "reference_sha256": sha}))
        copies = self.snapshot.changed_copies()
        if copies:
            reasons.append(Reason(
                "reference_modified", "the verifier's read-only copy of the reference was "
                f"written during verification: {_listed(copies)}", detail={"files": copies}))
        verifier = self.verifier_before.changed(verifier_manifest())
        if verifier:
            reasons.append(Reason(
                "verifier_modified", "the verifier's own source changed during verification: "
                f"{_listed(verifier)}", detail={"files": verifier}))
        reported = {str(self.reference.parent / rel) for rel in changed}
        workspace = [p for p in self.workspace.changed(rewatch(self.workspace))
                     if p not in reported]
        if workspace and guarded:
            notes.append(f"changed during verification, not by the candidate (its processes "
                         f"had no write access): {_listed(workspace)}")
        elif workspace:
            reasons.append(Reason(
                "workspace_modified", "the user's files changed while the candidate ran "
                f"(no write guard was enforced): {_listed(workspace)}",
                detail={"files": workspace}))
        attempts = sorted({a.get("path", "?") for result in candidate_results if result
                           for a in result.get("write_attempts") or []})
        if attempts:
            how = "refused by the write guard" if guarded else "no write guard was enforced"
            reasons.append(Reason(
                "writes_outside_sandbox", f"the candidate tried to write outside its private "
                f"folder ({how}): {_listed(attempts)}", detail={"paths": attempts}))
        reasons += self._ledger_reasons(candidate_results)
        exact = sum(1 for e in self.ledger or [] if e.get("float64") and not e.get("codes"))
        reduced = any(e.get("precision") not in (None, "fp32") for e in self.ledger or [])
        if exact and reduced:
            notes.append(f"{exact} comparison(s) passed only by the second opinion: outside the "
                         "precision's bound, but at most 2x less accurate than PyTorch run with "
                         "the same precision allowed, both measured from float64 (tolerances.py)")
        elif exact:
            notes.append(f"{exact} comparison(s) passed only against a float64 recomputation of "
                         "the reference: outputs near zero by cancellation, where the fp32 "
                         "reference is itself rounding noise (tolerances.py)")
        if self.workspace.skipped:
            notes.append(f"{self.workspace.skipped} file(s) next to the reference were too "
                         "large or too many to watch")
        verdict = dataclasses.replace(
            verdict, reference_sha256=sha, verifier_sha256=self.verifier_before.sha256,
            write_guard=self._guard_text(status), notes=list(verdict.notes) + notes,
            precision=precision_report(self.ledger))
        verdict = self._user_paths(verdict)
        if self.ledger is None and self.ledger_error and verdict.status == "accepted" \
                and not reasons:
            return dataclasses.replace(verdict, status="could_not_verify", timings=None,
                                       reasons=[Reason("verifier_error", self.ledger_error)])
        if not reasons:
            return verdict
        earlier = list(verdict.reasons) if verdict.status == "rejected" else []
        also = [f"also: {r.message}" for r in verdict.reasons if verdict.status != "rejected"]
        return dataclasses.replace(verdict, status="rejected", reasons=reasons + earlier,
                                   timings=None, notes=list(verdict.notes) + also)

    def _user_paths(self, verdict: Verdict) -> Verdict:
        """Messages name the user's reference, not the snapshot the workers loaded."""
        copy, user = str(self.snapshot.root), str(self.reference.parent)
        reasons = [dataclasses.replace(r, message=r.message.replace(copy, user))
                   for r in verdict.reasons]
        notes = [n.replace(copy, user) for n in verdict.notes]
        return dataclasses.replace(verdict, reasons=reasons, notes=notes)

    def _ledger_reasons(self, candidate_results: list[dict[str, Any] | None]) -> list[Reason]:
        """Each check the candidate's process reports as passed needs a clean comparison of
        that case in the judge's own record."""
        checks = [c for result in candidate_results if result
                  for c in result.get("checks") or [] if c.get("case") is not None]
        if not checks or self.ledger is None:
            return []
        # a comparison at the timing settings' looser bound vouches for that check only
        clean = Counter((e.get("case"), bool(e.get("timing_settings"))) for e in self.ledger
                        if not e.get("error") and not e.get("codes"))
        passed = Counter((c["case"], str(c.get("name", "")).startswith(f"{TIMING_SETTINGS_CHECK}:"))
                         for c in checks if c.get("passed"))
        missing = sorted({case for (case, kind), n in passed.items() if clean[case, kind] < n})
        if not missing:
            return []
        return [Reason("judge_bypassed", "the candidate's process reported checks as passed "
                       "that the judge never compared clean (cases "
                       f"{_listed(missing)}): its outputs were not what the judge saw, or the "
                       "verifier's code in that process was replaced", detail={"cases": missing})]

    def close(self) -> None:
        snapshot = getattr(self, "snapshot", None)
        if snapshot is not None:
            remove_snapshot(snapshot)
        shutil.rmtree(self._dir, ignore_errors=True)
