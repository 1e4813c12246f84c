"""`kernelstitch bench`: options -> BenchSettings, a rich progress bar, the summary, exit code.

Exit status: 0 the run completed and every problem was accepted; 1 it completed but some
problem was not accepted (rejected, could not verify, failed, timeout); 2 it could not start
(bad folder or options, ray missing); 130 interrupted (Ctrl-C; finished problems are saved and
reported).
"""

from __future__ import annotations

import datetime as _dt
import signal
import threading
import time
from pathlib import Path
from typing import Any

from kernelstitch.bench.problems import BenchError
from kernelstitch.bench.schedule import ScheduleEvent
from kernelstitch.bench.settings import BenchSettings

# The CLI's one exit-status table (README, "CLI"): 2 is "could not verify or run" everywhere.
EXIT_ALL_ACCEPTED, EXIT_NOT_ALL_ACCEPTED, EXIT_CANNOT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_NOTHING_VERIFIED = 2  # every problem could_not_verify (no GPU), as generate / verify / profile
_STYLE = {"accepted": "green", "rejected": "red", "failed": "red", "timeout": "yellow",
          "could_not_verify": "yellow", "cancelled": "yellow"}


class _Display:
    """Progress bar + one line per finished problem, on stderr."""

    def __init__(self, total: int, verbose: bool) -> None:
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from kernelstitch.core.terminal import console as make_console

        self.console = make_console(stderr=True)
        self.escape = escape  # problem names and messages may contain [brackets]
        self.verbose = verbose
        self.progress = Progress(
            TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.description}"), console=self.console,
        )
        self.task = self.progress.add_task("", total=total)
        self.preparing: set[str] = set()
        self.measuring: set[str] = set()
        self._lock = threading.Lock()

    def event(self, event: ScheduleEvent) -> None:
        with self._lock:
            if event.phase == "prepare":
                self.preparing.add(event.problem)
            elif event.phase == "measure":
                self.preparing.discard(event.problem)
                self.measuring.add(event.problem)
            else:
                self.preparing.discard(event.problem)
                self.measuring.discard(event.problem)
                self._finished(event)
            self.progress.update(self.task, description=(
                f"preparing {len(self.preparing)} · measuring {len(self.measuring)}"))

    def _finished(self, event: ScheduleEvent) -> None:
        o = event.outcome
        assert o is not None
        style = _STYLE.get(o.status, "white")
        speed = f" {o.speedup_vs_eager:.2f}x vs eager" if o.correct and o.speedup_vs_eager else ""
        where = " (reused)" if o.reused else (f" [gpu {o.gpu}]" if o.gpu is not None else "")
        text = self.escape(f"{o.problem}{speed}{where}: {o.message}")
        self.progress.console.print(f"[{style}]{o.status:>16}[/] {text}", highlight=False)
        self.progress.advance(self.task)

    def log(self, problem: str, message: str) -> None:
        if self.verbose:
            text = self.escape(f"{problem}: {message}")
            self.progress.console.print(f"  [dim]{text}[/]", highlight=False)


def bench_command(
    directory: Path,
    out_dir: Path | None = None,
    only: list[str] | None = None,
    *,
    levels: list[str] | None = None,
    coder: str = "builtin",
    jobs: int = 1,
    build_jobs: int | None = None,
    time_limit_s: float | None = None,
    profile: bool = False,
    seeds: int = 3,
    timing_budget_s: float = 1.0,
    rerun: bool = False,
    search: bool = True,
    ray: str | None = None,
    llm: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
    workspace: Path | None = None,
    verbose: bool = False,
    command: str | None = None,
    resume_from: list[Path] | None = None,
    precision: str = "fp32",
) -> int:
    from kernelstitch.bench.problems import discover
    from kernelstitch.bench.run import run_bench
    from kernelstitch.bench.settings import DEFAULT_TIME_LIMIT_S, default_build_jobs
    from kernelstitch.core.terminal import console as make_console
    from kernelstitch.core.terminal import plain

    err = make_console(stderr=True)
    out = out_dir or Path("bench/results") / _dt.date.today().isoformat()
    stop = threading.Event()
    try:
        settings = BenchSettings(
            coder=coder, jobs=jobs,
            build_jobs=default_build_jobs() if build_jobs is None else build_jobs,
            time_limit_s=DEFAULT_TIME_LIMIT_S if time_limit_s is None else time_limit_s,
            profile=profile, seeds=seeds, timing_budget_s=timing_budget_s,
            rerun=rerun, search=search, ray_address=ray, llm=dict(llm or {}), budget=dict(budget or {}),
            precision=precision,
        )
        total = len(discover(Path(directory), levels, only))
        display = _Display(total, verbose)
        previous = _install_sigint(stop, err)
        try:
            with display.progress:
                run = run_bench(Path(directory), out, settings, levels=levels, only=only,
                                workspace_root=workspace, command=command,
                                on_event=display.event, log=display.log, stop=stop,
                                resume_from=resume_from)
        finally:
            _restore_sigint(previous)
    except BenchError as exc:
        err.print(f"[red]bench: {plain(exc)}[/]", highlight=False)
        return EXIT_CANNOT_RUN
    print(run.files["markdown"].read_text(encoding="utf-8"))
    for note in run.notes:
        err.print(f"note: {plain(note)}", highlight=False)
    s = run.summary
    err.print(f"{s['accepted']}/{s['problems']} accepted; results in {plain(run.out_dir)}/ "
              f"(results.json, results.md{', plots' if len(run.files) > 2 else ''})",
              highlight=False)
    if run.interrupted:
        return EXIT_INTERRUPTED
    if s["problems"] and s["by_status"].get("could_not_verify", 0) == s["problems"]:
        err.print("nothing was verified (no GPU here): exit status 2, as generate, verify and profile",
                  highlight=False)
        return EXIT_NOTHING_VERIFIED
    return EXIT_ALL_ACCEPTED if s["accepted"] == s["problems"] else EXIT_NOT_ALL_ACCEPTED


SIGINT_REPEAT_S = 2.0  # a second SIGINT this soon is the same stop (`timeout` sends two)


def _install_sigint(stop: threading.Event, err: Any) -> Any:
    """First Ctrl-C: cancel running problems and write the report; a second one (more than
    SIGINT_REPEAT_S later): abort.  `timeout -s INT` signals the process and then its process
    group, so one time-out arrives as two SIGINTs: the second must not abort the report."""
    if threading.current_thread() is not threading.main_thread():
        return None
    first: list[float] = []

    def handler(_signum: int, _frame: Any) -> None:
        if not first:
            first.append(time.monotonic())
            err.print("[yellow]stopping: cancelling running problems (Ctrl-C again to abort)[/]")
            stop.set()
        elif time.monotonic() - first[0] > SIGINT_REPEAT_S:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt

    return signal.signal(signal.SIGINT, handler)


def _restore_sigint(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
