"""Capture, plan and code in this process: the built-in path without workers, for tests and
scripts that trust the module they load.  The pipeline runs the same stages with capture in a
worker (`pipeline.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelstitch.agents.coder.builtin import Candidate, code_builtin
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture


def generate_builtin(path: str | Path, module: str | None = None,
                     output_path: str | Path | None = None,
                     constants: dict[str, Any] | None = None) -> Candidate:
    """Capture (in this process: it runs the user's code), plan and code."""
    plan = plan_builtin(capture(path, module, constants))
    target = Path(output_path) if output_path else Path(path).resolve().parent / "model_new.py"
    return code_builtin(plan, path, target)
