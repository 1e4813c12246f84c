"""Where the GPU time goes: per-kernel CUDA time of the original, torch.compile and the built-in
plan (default variant), for a few KernelBench problems, on a GPU machine.

    python bench/kernel_breakdown.py PROBLEM.py[=model_new.py] [...] --out breakdown.json [--top 6]

With `=model_new.py` it profiles that program (a search variant written by `kernelstitch
generate`) instead of generating the default variant.  Each column also sums its kernels by
family (`kernel_family`: our kernels by kind, cuDNN / cuBLAS, PyTorch's batch norm and
elementwise kernels), so two programs compare family by family; `max_abs_diff` is the largest
difference of one call's outputs from the module's (kernels not yet run on a GPU show here
whether they compute the right thing before their times mean anything).

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


# (family, substrings of a kernel name), first match wins; ours are named ks_s<step>_<kind>
_FAMILIES = (
    ("ours: batch statistics", ("batch_stats",)), ("ours: elementwise", ("elementwise",)),
    ("ours: reduction", ("reduction", "_reduce", "softmax", "group_norm", "gn_")),
    ("ours: pooling", ("pool",)), ("ours: layout copies", ("layout_swap",)), ("ours: other", ("ks_",)),
    ("batch norm (PyTorch, cuDNN)", ("batch_norm", "bn_fw", "bn_")),
    ("triton (torch.compile)", ("triton",)),
    ("convolution (cuDNN)", ("conv", "fprop", "dgrad", "implicit_gemm", "xmma", "cudnn", "winograd")),
    ("GEMM (cuBLAS)", ("gemm", "cublas", "cutlass", "sm90_")),
    ("layout copies", ("nchwToNhwc", "nhwcToNchw", "transpose", "copy")),
    ("pooling (PyTorch)", ("pool",)), ("elementwise (PyTorch)", ("elementwise", "vectorized")),
)


def kernel_family(name: str) -> str:
    ours = name.startswith("ks_") or "void ks_" in name
    for family, needles in _FAMILIES:
        if family.startswith("ours") != ours:
            continue
        if any(n.lower() in name.lower() for n in needles):
            return family
    return "ours: other" if ours else "other"


def _families(kernels: dict[str, float]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for name, ms in kernels.items():
        sums[kernel_family(name)] += ms
    return {k: round(v, 4) for k, v in sorted(sums.items(), key=lambda kv: -kv[1])}


def launched_kernel_table(fn, inputs, calls: int) -> dict[str, float]:
    """_kernel_table, with a program that replays a CUDA graph launched kernel by kernel (the
    same kernels) so the profiler names each one."""
    graphs = getattr(fn, "_cuda_graphs", None)
    if graphs is not None:
        fn._cuda_graphs = None
    try:
        return _kernel_table(fn, inputs, calls)
    finally:
        if graphs is not None:
            fn._cuda_graphs = graphs


def _total_ms(fn, inputs, calls: int) -> float:
    import torch

    from kernelstitch.core.cuda_timing import CudaTimer

    with torch.no_grad():
        fn(*inputs)
        return CudaTimer().span(fn, *inputs, repeat=calls).gpu_ms


def _max_abs_diff(model, ours, inputs) -> float:
    """The largest |ours - model| over the outputs of one call each (a check that the kernels
    profiled compute the module, not a verification: the Verifier's bounds are elsewhere)."""
    import torch

    with torch.no_grad():
        want, got = model(*inputs), ours(*inputs)
    pairs = zip(want, got, strict=True) if isinstance(want, (tuple, list)) else [(want, got)]
    return max(float((g.float() - w.float()).abs().max()) if w.numel() else 0.0 for w, g in pairs)


def breakdown(path: Path, calls: int, top: int, program: Path | None = None) -> dict:
    import torch
    from kernelstitch.agents.coder.builtin import write_candidate
    from kernelstitch.agents.inprocess import generate_builtin

    from kernelstitch.core.problem import import_file, load_problem

    problem = load_problem(path)
    torch.manual_seed(0)
    model = problem.build().cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.inputs()]
    if program is None:
        out_dir = Path(tempfile.mkdtemp(prefix="ks_breakdown_"))
        candidate = generate_builtin(path, output_path=out_dir / "model_new.py")
        write_candidate(candidate, out_dir)
        program = out_dir / "model_new.py"
        plan = [s.technique + ":" + s.description[:70] for s in candidate.plan.steps]
    else:
        plan = str(program)
    torch.manual_seed(0)
    ours = import_file(program, "ks_breakdown").ModelNew(*problem.get_init_inputs()).cuda()
    ours.load_state_dict(model.state_dict())
    compiled = torch.compile(model)
    result = {"problem": path.stem, "plan": plan, "max_abs_diff": _max_abs_diff(model, ours, inputs)}
    for label, fn in (("eager", model), ("compile", compiled), ("ours", ours)):
        # profiled launched; the total below is timed replayed, as delivered
        kernels = launched_kernel_table(fn, inputs, calls)
        result[label] = {"total_ms": _total_ms(fn, inputs, calls),
                         "kernel_ms": round(sum(kernels.values()), 4),
                         "families": _families(kernels),
                         "kernels": dict(list(kernels.items())[:top]),
                         "kernel_count": len(kernels)}
    from kernelstitch.agents.verifier.graph_replay import GraphedModule
    result["eager"]["graph_total_ms"] = _total_ms(GraphedModule(model), inputs, calls)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", help="PROBLEM.py or PROBLEM.py=model_new.py")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--top", type=int, default=6)
    args = parser.parse_args()
    results = []
    for spec in args.problems:
        path, _, program = spec.partition("=")
        try:
            row = breakdown(Path(path), args.calls, args.top, Path(program) if program else None)
        except Exception:  # noqa: BLE001 - one problem's failure is reported, the rest run
            row = {"problem": Path(path).stem, "error": traceback.format_exc()[-1500:]}
        results.append(row)
        args.out.write_text(json.dumps(results, indent=1))
        print(json.dumps(row, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
