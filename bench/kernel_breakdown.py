"""Where the GPU time goes: per-kernel CUDA time of the original, torch.compile and the built-in
plan (default variant), for a few KernelBench problems, on a GPU machine.

    python bench/kernel_breakdown.py PROBLEM.py [...] --out breakdown.json [--top 6]

It trusts the problem files (it runs them in this process): use it on KernelBench, not on
untrusted code.  Timings are torch.profiler kernel times averaged over the profiled calls; the
totals are CUDA-event times of whole calls (the same CudaTimer as the verifier).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import traceback
from collections import defaultdict
from pathlib import Path


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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

    with torch.no_grad():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn(*inputs)
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            fn(*inputs)
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def breakdown(path: Path, calls: int, top: int) -> dict:
    import torch
    from kernelstitch.agents.coder.builtin import write_candidate
    from kernelstitch.agents.inprocess import generate_builtin

    problem = _load(path, f"ks_problem_{abs(hash(path))}")
    init = problem.get_init_inputs() if hasattr(problem, "get_init_inputs") else []
    torch.manual_seed(0)
    model = problem.Model(*init).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    out_dir = Path(tempfile.mkdtemp(prefix="ks_breakdown_"))
    candidate = generate_builtin(path, output_path=out_dir / "model_new.py")
    write_candidate(candidate, out_dir)
    new_module = _load(out_dir / "model_new.py", f"ks_new_{abs(hash(path))}")
    torch.manual_seed(0)
    ours = new_module.ModelNew(*init).cuda()
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
