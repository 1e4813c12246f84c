"""Tasks for the sandbox tests (test_verifier_protect.py): what a guarded worker can do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def try_write(path: str) -> str:
    """'ok', or the name of the exception writing `path` raised."""
    try:
        with open(path, "w") as handle:
            handle.write("written by a guarded worker\n")
        return "ok"
    except OSError as exc:
        return type(exc).__name__


def try_child_write(path: str) -> int:
    """A child process (as nvcc or ninja would be) writing `path`: its exit status."""
    return subprocess.run(["/bin/sh", "-c", f"echo child > '{path}'"], capture_output=True,
                          timeout=30).returncode


def environment() -> dict:
    return {"env": dict(os.environ), "cwd": os.getcwd()}


def parent_environment() -> str:
    """The starting process's environment through /proc: its text, or the exception's name."""
    try:
        return Path(f"/proc/{os.getppid()}/environ").read_bytes().decode(errors="replace")
    except OSError as exc:
        return type(exc).__name__


def write_attempts() -> list:
    from kernelstitch.core import sandbox

    return sandbox.write_attempts()


def import_candidate(path: str, reference_path: str, fallback: str | None = None) -> dict:
    """What candidate_task does before its checks, on the CPU: the reference problem from the
    snapshot, then the candidate file imported, built and called once; plus the write log."""
    from kernelstitch.agents.verifier.reference_task import add_import_fallback

    from kernelstitch.core import sandbox
    from kernelstitch.core.problem import import_file, load_problem

    add_import_fallback(fallback)
    problem = load_problem(Path(reference_path))
    try:
        namespace = import_file(Path(path), prefix="ks_candidate")
        model = namespace.ModelNew(*problem.get_init_inputs())
        out = model(*problem.inputs())
    except Exception as exc:  # noqa: BLE001 - as candidate_task's load_failure: still report
        return {"write_attempts": sandbox.write_attempts(), "error": f"{exc}"[:500]}
    return {"write_attempts": sandbox.write_attempts(), "out_shape": list(out.shape)}


def load_reference(path: str, fallback: str | None = None) -> dict:
    """Where a snapshotted reference's local imports were loaded from."""
    from kernelstitch.agents.verifier.reference_task import add_import_fallback

    from kernelstitch.core.problem import load_problem

    add_import_fallback(fallback)
    problem = load_problem(Path(path))
    value = problem.build()(*problem.inputs()).tolist()  # forward imports ks_dynamic
    files = {name: getattr(sys.modules.get(name), "__file__", None)
             for name in ("ks_helper", "ks_pkg", "ks_pkg.inner", "ks_dynamic")}
    return {"files": files, "reference": problem.namespace.__file__, "value": value}
