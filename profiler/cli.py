"""`kernelstitch profile FILE[::Module]`: the entry point the typer CLI wires in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelstitch.profiler.profile import BACKENDS, NoGpuError, profile_module
from kernelstitch.profiler.runner import TaskError

from kernelstitch.core.problem import ProblemError, resolve_module, split_target

EXIT_OK, EXIT_ERROR, EXIT_NO_GPU = 0, 1, 2


def profile_command(
    target: str,
    *,
    json_out: Path | None = None,
    json_stdout: bool = False,
    backends: list[str] | None = None,
    plot: Path | None = None,
    candidate: bool = False,
    work_dir: Path | None = None,
) -> int:
    """Profile a module and print the kernel table and findings; returns the exit code.

    `candidate=True` profiles the file's generated `ModelNew` instead of the named module.
    `json_stdout`: exactly one JSON object on stdout (the report, or {"error": ...}), the table
    on stderr, as `generate --json` and `verify --json`; `json_out`: the report written there.
    """
    from kernelstitch.profiler.render import plot_roofline, print_report

    from kernelstitch.core.terminal import console as make_console
    from kernelstitch.core.terminal import plain

    console = make_console(stderr=json_stdout)
    err = make_console(stderr=True)

    def fail(message: str, code: int) -> int:
        if json_stdout:
            print(json.dumps({"error": message, "exit_status": code}))
        err.print(f"[red]{plain(message)}[/]")
        return code

    backends = list(backends or ["torch", "ncu"])
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        return fail(f"unknown backend(s) {unknown}; choose from {list(BACKENDS)}", EXIT_ERROR)
    path, module = split_target(target)
    if candidate:
        module = "ModelNew"
    try:
        module = resolve_module(path, module).name  # fail fast, before any process starts
        report = profile_module(path, module, backends=backends, work_dir=work_dir)
    except ProblemError as exc:
        return fail(str(exc), EXIT_ERROR)
    except NoGpuError:
        return fail("no GPU found: profiling needs a CUDA device (torch.cuda.is_available() is False "
                    "in the worker)", EXIT_NO_GPU)
    except TaskError as exc:
        return fail(f"profiling failed: {exc}", EXIT_ERROR)
    print_report(report, console)
    if json_stdout:
        print(report.to_json())
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(report.to_json())
        console.print(f"wrote {plain(json_out)}")
    if plot and report.roofline:
        console.print(f"wrote {plain(plot_roofline(report, plot))}")
    return EXIT_OK


if (
    __name__ == "__main__"
):  # python -m kernelstitch.profiler.cli FILE[::Module] [out.json] [plot.png]
    argv = sys.argv[1:]
    sys.exit(
        profile_command(
            argv[0],
            json_out=Path(argv[1]) if len(argv) > 1 else None,
            plot=Path(argv[2]) if len(argv) > 2 else None,
        )
    )
