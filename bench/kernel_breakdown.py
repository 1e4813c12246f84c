"""Where the GPU time goes: per-kernel CUDA time of the original, torch.compile and the built-in
plan (default variant), for a few KernelBench problems, on a GPU machine.

    python bench/kernel_breakdown.py PROBLEM.py [...] --out breakdown.json [--top 6]

It trusts the problem files (it runs them in this process): use it on KernelBench, not on
untrusted code.  Timings are torch.profiler kernel times averaged over the profiled calls; the
totals are CUDA-event times of `--calls` back-to-back calls, per call (core.cuda_timing's
CudaTimer, the verifier's timer).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import traceback
from collections import defaultdict
from pathlib import Path


def _kernel_table(fn, inputs, calls: int) -> dict[str, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*inputs)
            torch.cuda.synchronize()
    table: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type.name == "CUDA":
            table[event.name[:90]] += event.device_time_total / 1000.0 / calls
    return dict(sorted(table.items(), key=lambda kv: -kv[1]))


def _total_ms(fn, inputs, calls: int) -> float:
    import torch

    from kernelstitch.core.cuda_timing import CudaTimer

    with torch.no_grad():
        fn(*inputs)
        return CudaTimer().span(fn, *inputs, repeat=calls).gpu_ms


def breakdown(path: Path, calls: int, top: int) -> dict:
    import torch
    from kernelstitch.agents.coder.builtin import write_candidate
    from kernelstitch.agents.inprocess import generate_builtin

    from kernelstitch.core.problem import import_file, load_problem

    problem = load_problem(path)
    torch.manual_seed(0)
    model = problem.build().cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.inputs()]
    out_dir = Path(tempfile.mkdtemp(prefix="ks_breakdown_"))
    candidate = generate_builtin(path, output_path=out_dir / "model_new.py")
    write_candidate(candidate, out_dir)
    torch.manual_seed(0)
    ours = import_file(out_dir / "model_new.py", "ks_breakdown").ModelNew(*problem.get_init_inputs()).cuda()
    compiled = torch.compile(model)
    result = {"problem": path.stem, "plan": [s.technique + ":" + s.description[:70]
                                             for s in candidate.plan.steps]}
    for label, fn in (("eager", model), ("compile", compiled), ("ours", ours)):
        kernels = _kernel_table(fn, inputs, calls)
        result[label] = {"total_ms": _total_ms(fn, inputs, calls),
                         "kernels": dict(list(kernels.items())[:top]),
                         "kernel_count": len(kernels)}
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--top", type=int, default=6)
    args = parser.parse_args()
    results = []
    for path in args.problems:
        try:
            row = breakdown(path, args.calls, args.top)
        except Exception:  # noqa: BLE001 - one problem's failure is reported, the rest run
            row = {"problem": path.stem, "error": traceback.format_exc()[-1500:]}
        results.append(row)
        args.out.write_text(json.dumps(results, indent=1))
        print(json.dumps(row, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
