"""Terminal front-end of the pipeline: `kernelstitch generate` with rich progress."""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import asdict
from pathlib import Path

from kernelstitch.agents.job_protocol import JobResult, ProgressEvent

from kernelstitch.core.problem import split_target
from kernelstitch.core.workspace import Workspace, find_workspace_root

EXIT_BY_VERDICT = {"accepted": 0, "rejected": 1, "could_not_verify": 2}


def exit_code(result: JobResult) -> int:
    """0 accepted (or written when verification was off), 1 rejected/failed, 2 unverified."""
    if result.status != "succeeded":
        return 1
    if result.verdict is None:
        return 0
    return EXIT_BY_VERDICT.get(result.verdict.get("status", ""), 1)


def llm_settings(**options: object) -> tuple[dict, dict]:
    """(PipelineConfig.llm, PipelineConfig.budget) from the CLI's options (None: not given)."""
    llm_keys = ("base_url", "model", "api_key_env", "timeout_s", "planner")
    llm = {k: options[k] for k in llm_keys if options.get(k) is not None}
    budget = {k: options[k] for k in ("iterations", "time_s", "tokens")
              if options.get(k) is not None}
    return llm, budget


def generate_command(
    target: str,
    *,
    coder: str,
    verify: bool,
    profile: bool,
    json_output: bool,
    workspace: Path | None,
    llm: dict | None = None,
    budget: dict | None = None,
    search: bool = True,
    variants: int = 4,
    search_time_s: float = 180.0,
    precision: str = "fp32",
) -> int:
    from kernelstitch.agents.pipeline import PipelineConfig, run_generate

    from kernelstitch.core.terminal import console as make_console
    from kernelstitch.core.terminal import plain

    console = make_console(stderr=True)
    source, module = split_target(target)
    if not source.exists():
        console.print(f"[red]no such file: {plain(source)}[/red]")
        return 1
    root = workspace or find_workspace_root(source.resolve())
    if coder not in ("builtin", "llm"):
        console.print(f"[red]unknown coder {plain(repr(coder))}: choose builtin or llm[/red]")
        return 1
    config = PipelineConfig(coder=coder, verify=verify, profile=profile, llm=dict(llm or {}),
                            budget=dict(budget or {}), search=search, variants=max(1, variants),
                            search_time_s=max(1.0, search_time_s), precision=precision)
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())

    def show(event: ProgressEvent) -> None:
        step = f" [{event.step}/{event.total}]" if event.step else ""
        console.print(f"[cyan]{event.stage:>10}[/cyan]{plain(step)} {plain(event.message)}")

    try:
        result = run_generate(source, module, Workspace(root), config, show, cancel)
    finally:
        signal.signal(signal.SIGINT, previous)
    if json_output:
        print(json.dumps(asdict(result), indent=2))
    else:
        colour = {"succeeded": "green", "failed": "red", "cancelled": "yellow"}[result.status]
        console.print(f"[{colour}]{result.status}[/{colour}]: {plain(result.message)}")
        if result.candidate_path:
            console.print(f"candidate: {plain(result.candidate_path)}")
        elif (result.selection or {}).get("decision") == "keep_original":
            console.print("no replacement offered: keep your module (the measured table is in "
                          "the report)")
        if result.report_path:
            console.print(f"report:    {plain(result.report_path)}")
    return exit_code(result)
