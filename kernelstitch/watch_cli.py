"""`kernelstitch watch DIR`: re-verify generated implementations when they or their sources
change; print when a re-verify starts and how it ends (a verdict change, or unchanged), a saved
source that does not parse, and a deleted file.

File events come from kernelstitch.server.watch (watchdog, debounced, atomic-save aware);
verification runs through the same pipeline as the editor's, one at a time (one GPU).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelstitch.core.problem import scan_source
from kernelstitch.core.workspace import Workspace, find_workspace_root

CANDIDATE_FILE = "model_new.py"


@dataclass
class VerdictBoard:
    """Last verdict per (source, module); reports only changes."""

    last: dict[tuple[str, str], str] = field(default_factory=dict)

    def update(self, source: str, module: str, verdict: str) -> str | None:
        key = (source, module)
        before = self.last.get(key)
        self.last[key] = verdict
        if before == verdict:
            return None
        return f"{Path(source).name}::{module}: {before or 'new'} -> {verdict}"


def parse_problem(path: Path) -> str | None:
    """Why a changed source cannot be verified now (it does not parse), or None."""
    try:
        scan = scan_source(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if scan.error is None:
        return None
    return f"{path.name}:{scan.error.line}: {scan.error.message}: not verified until it parses"


def targets_for_change(path: Path, workspace: Workspace) -> list[tuple[Path, str]]:
    """(source, module) pairs whose verdict may change when `path` changed."""
    if path.name == CANDIDATE_FILE and workspace.state_dir in path.parents:
        plan_file = path.parent / "plan.json"
        try:
            plan = json.loads(plan_file.read_text())
            return [(Path(plan["source_path"]), plan["module"])]
        except (OSError, ValueError, KeyError):
            return []
    if workspace.state_dir in path.parents:
        return []
    try:
        scan = scan_source(path.read_text(encoding="utf-8"))
    except OSError:
        return []
    return [
        (path, m.name) for m in scan.problems()
        if (workspace.output_dir(path, m.name) / CANDIDATE_FILE).exists()
    ]


def _verdict_text(result) -> str:
    verdict = result.verdict or {}
    status = verdict.get("status") or result.status
    codes = [r.get("code", "?") for r in verdict.get("reasons", [])]
    return f"{status} ({', '.join(codes)})" if codes and status == "rejected" else status


def watch_command(directory: Path, *, once_for_testing: threading.Event | None = None) -> int:
    from kernelstitch.agents.pipeline import PipelineConfig, run_verify
    from kernelstitch.server.watch import watch_directory

    directory = directory.resolve()
    if not directory.is_dir():
        print(f"not a folder: {directory}")
        return 1
    workspace = Workspace(find_workspace_root(directory / "_"))
    board = VerdictBoard()
    gpu = threading.Lock()
    config = PipelineConfig()
    cancel = threading.Event()  # Ctrl-C: the verify in flight stops and records itself cancelled

    def on_change(path: Path) -> None:
        problem = parse_problem(path)
        if problem is not None:
            print(problem, flush=True)
            return
        for source, module in targets_for_change(path, workspace):
            if cancel.is_set():
                return
            name = f"{Path(source).name}::{module}"
            with gpu:
                print(f"{name}: verifying ({path.name} changed)", flush=True)
                result = run_verify(source, module, None, workspace, config, lambda _e: None, cancel)
            verdict = _verdict_text(result)
            change = board.update(str(source), module, verdict)
            print(change or f"{name}: {verdict} (unchanged)", flush=True)

    def on_delete(path: Path) -> None:
        print(f"{path.name} deleted: nothing of it is re-verified", flush=True)

    print(f"watching {directory} (Ctrl-C to stop)", flush=True)
    with watch_directory(directory, on_change, on_delete=on_delete):
        try:
            while not (once_for_testing and once_for_testing.is_set()):
                time.sleep(0.2)
        except KeyboardInterrupt:
            cancel.set()
            if not gpu.acquire(timeout=30):  # let the verify in flight record its cancellation
                print("a verify did not stop within 30 s", flush=True)
    return 0
