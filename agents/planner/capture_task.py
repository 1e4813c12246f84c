"""Worker tasks of the graph layer (they execute user code: run them through the worker)."""

from __future__ import annotations

from typing import Any

from kernelstitch.agents.planner.capture import capture


def capture_graph(path: str, module: str | None = None,
                  constants: dict[str, Any] | None = None) -> dict[str, Any]:
    """`kernelstitch.agents.planner.capture_task:capture_graph`: the module's forward as Graph JSON.
    Raises GraphCaptureError (message names the user's line when known)."""
    return capture(path, module, constants).to_json()
