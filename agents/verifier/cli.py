"""`kernelstitch verify REF.py CAND.py`: a linter-style front-end of verify().

Exit status: 0 accepted, 1 rejected, 2 could not verify.  With --json exactly one JSON object
(the verdict) goes to stdout; progress and the human summary go to stderr/stdout otherwise.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

from kernelstitch.agents.verifier.verdict import Reason, Verdict

from kernelstitch.core.precision import timed_with
from kernelstitch.core.terminal import console as make_console
from kernelstitch.core.terminal import plain

STATUS_STYLE = {"accepted": "green", "rejected": "red", "could_not_verify": "yellow"}


def print_summary(verdict: Verdict, console) -> None:
    style = STATUS_STYLE[verdict.status]
    where = f" on {plain(verdict.device)}" if verdict.device else ""
    console.print(f"[bold {style}]{verdict.status.replace('_', ' ')}[/bold {style}]{where}")
    for reason in verdict.reasons:
        line = f" (line {reason.line})" if reason.line else ""
        console.print(f"  [{style}]{reason.code}[/{style}]{line}: {plain(reason.message)}",
                      markup=True, highlight=False)
    t = verdict.timings
    if t is not None:
        allowed = timed_with(t.precision)
        if t.eager_fp32_ms is not None and t.speedup_vs_eager_fp32 is not None:
            console.print(f"  eager in fp32 {t.eager_fp32_ms.median:.4f} ms: "
                          f"{t.speedup_vs_eager_fp32:.2f}x (precision and fusion)")
        noise = "" if t.significant_vs_eager else " (within noise)"
        console.print(f"  candidate {t.candidate_ms.median:.4f} ms, eager{allowed} "
                      f"{t.eager_ms.median:.4f} ms: {t.speedup_vs_eager:.2f}x{noise}")
        if t.compiled_ms is not None and t.speedup_vs_compiled is not None:
            noise = "" if t.significant_vs_compiled else " (within noise)"
            console.print(f"  torch.compile{allowed} {t.compiled_ms.median:.4f} ms: "
                          f"{t.speedup_vs_compiled:.2f}x{noise}")
    if verdict.precision is not None:
        console.print(f"  precision: {plain(verdict.precision.sentence())}", highlight=False)
    passed = sum(1 for c in verdict.checks if c.passed)
    names = ", ".join(c.name if c.passed else f"{c.name} (failed)" for c in verdict.checks)
    console.print(f"  checks passed {passed}/{len(verdict.checks)}" + (f" ({plain(names)})" if names else "")
                  + f"; seeds {', '.join(str(s) for s in verdict.seeds)}", highlight=False)
    for note in verdict.notes:
        console.print(f"  [dim]note: {plain(note)}[/dim]", highlight=False)


def verify_command(ref: Path, cand: Path, *, json_output: bool, module: str | None, seeds: int,
                   timing: bool, precision: str = "fp32") -> int:
    from kernelstitch.agents.verifier.api import VerifyOptions, verify
    err = make_console(stderr=True)
    for path in (ref, cand):
        if not Path(path).exists():
            code = "reference_error" if path == ref else "verifier_error"
            verdict = Verdict("could_not_verify", [Reason(code, f"no such file: {path}")])
            if json_output:
                print(json.dumps(verdict.to_json()))
            else:
                err.print(f"[red]no such file: {plain(path)}[/red]")
            return 2
    cancel = threading.Event()
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    except ValueError:  # not the main thread (tests): no signal handler
        previous = None
    try:
        verdict = verify(
            Path(ref), Path(cand), reference_module=module,
            options=VerifyOptions(seeds=seeds, timing=timing, precision=precision),
            progress=None if json_output else (lambda m: err.print(f"[cyan]verify[/cyan] {plain(m)}")),
            cancel=cancel,
        )
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if json_output:
        print(json.dumps(verdict.to_json()))
    else:
        print_summary(verdict, make_console())
    return verdict.exit_code()
