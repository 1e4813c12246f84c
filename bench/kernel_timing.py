"""What the kernel timing scripts (bench/*_timing.py) share: their command line, the loop that
checks each variant's result, then times it with the Verifier's CUDA-event timer, and their main
(build one extension, measure each case, save the rows)."""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timing_args(doc: str, **extra: dict[str, Any]) -> argparse.Namespace:
    """--out (a JSON file) and --runs (samples a variant, median reported), plus `extra` options
    (name -> add_argument keywords)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=30)
    for name, options in extra.items():
        parser.add_argument(f"--{name}", **options)
    return parser.parse_args()


def load_kernel_extension(name: str, kernels: list) -> Any:
    """The emitted `kernels` (KernelSource) built into one extension named `name`, with the
    flags the coder builds its programs with."""
    from kernelstitch.agents.coder.codegen import EXTRA_CFLAGS, EXTRA_CUDA_CFLAGS, EXTRA_LDFLAGS
    from kernelstitch.agents.coder.codegen.common import build_extension_sources
    from torch.utils.cpp_extension import load_inline

    cpp, cuda, functions = build_extension_sources(kernels)
    return load_inline(name=name, cpp_sources=[cpp], cuda_sources=[cuda], functions=functions,
                       extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                       extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)


def timed_variants(timer, variants: dict[str, Callable[..., Any]], check: Callable[[str, Any], None],
                   nbytes: int, runs: int, *args: Any) -> dict[str, dict[str, float]]:
    """Each variant called once and its result given to `check(name, result)` (which raises on a
    wrong one), then timed: {name: {"ms": median, "tb_per_s": nbytes over it}}."""
    rows = {}
    for name, fn in variants.items():
        check(name, fn(*args))
        ms = statistics.median(timer.samples_ms(fn, *args, runs=runs))
        rows[name] = {"ms": round(ms, 4), "tb_per_s": round(nbytes / (ms * 1e-3) / 1e12, 3)}
    return rows


def save(out: Path | None, device: str, results: list[dict], **extra: Any) -> None:
    """The rows as one JSON file at `out` (none: nothing), with the device's name."""
    if out:
        out.write_text(json.dumps({"device": device, **extra, "results": results}, indent=1))


def pool_layout_rows(torch, ext, timer, runs: int, k: int, label: str, forms: dict[str, str],
                     reference: Callable[..., Any], want: Any, args: tuple, close: bool = False) -> list[dict]:
    """A pooling case over channels-last input (args[0]), timed with a contiguous (NCHW) and a
    channels-last (NHWC) output: each form (column -> suffix of the extension's pool{k}_nchw /
    pool{k}_cl functions) and torch's `reference`, each checked against `want` first (equal, or
    allclose to 1e-5 with `close`).  TB/s counts the input read once and the output written once."""
    rows = []
    nbytes = (args[0].numel() + want.numel()) * 4
    for keep in (False, True):
        name = f"pool{k}_{'cl' if keep else 'nchw'}"
        row = {"case": label, "input": list(args[0].shape), "output": "NHWC" if keep else "NCHW"}
        variants = {form: getattr(ext, name + suffix) for form, suffix in forms.items()} | {"torch": reference}

        def check(form, got, row=row):
            same = torch.allclose(got, want, rtol=1e-5, atol=1e-5) if close else torch.equal(got, want)
            if not same:
                raise SystemExit(f"{form} differs from torch on {label} ({row['output']} out)")

        row.update(timed_variants(timer, variants, check, nbytes, runs, *args))
        rows.append(row)
    return rows


def run_cases(doc: str, build: Callable[[Any], Any], measure: Callable[..., list[dict]], cases: int) -> int:
    """A timing script's main: --out / --runs from the command line, `build(torch)` once, then
    `measure(torch, ext, timer, runs, k)` for case k = 0 .. cases - 1 (its rows printed as JSON lines
    as they come), every row saved to --out."""
    args = timing_args(doc)

    import torch

    from kernelstitch.core.cuda_timing import CudaTimer

    ext = build(torch)
    timer = CudaTimer()
    results = []
    for k in range(cases):
        for row in measure(torch, ext, timer, args.runs, k):
            results.append(row)
            print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    save(args.out, torch.cuda.get_device_name(), results)
    return 0
