"""Where a candidate's bench time goes beyond its kernel: times the generated ModelNew of a problem
three ways on one GPU, and its kernels alone through torch.profiler.

  flushed:   as the Verifier times (L2 flushed by writing 2x its size, device synchronised, event
             around the call): kernel + host launch path + write-back of the flush's dirty lines
  synced:    no flush, device synchronised before each timed call (host launch path included)
  queued:    no flush, 50 calls back to back between two events (host path hidden), per call
  kernel:    the CUDA kernels' own durations from torch.profiler, per call

Usage (GPU machine): python bench/microbench/overhead.py DIR/.kernelstitch/<p>/Model/model_new.py DIR/<p>.py
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys

import torch

from kernelstitch.core.cuda_timing import CudaTimer


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(candidate: str, problem: str) -> None:
    prob = load(problem, "problem")
    cand = load(candidate, "candidate")
    torch.manual_seed(0)
    model = cand.ModelNew(*prob.get_init_inputs()).cuda()
    x = [t.cuda() for t in prob.get_inputs()]
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    timer = CudaTimer()
    with torch.no_grad():
        for _ in range(5):
            model(*x)
        torch.cuda.synchronize()
        out = {"problem": problem}
        for mode in ("flushed", "synced"):
            fill = (lambda: flush.fill_(1)) if mode == "flushed" else None
            samples = [timer.span(model, *x, flush=fill).gpu_ms for _ in range(40)]
            out[mode] = round(statistics.median(samples), 4)
        out["queued"] = round(timer.span(model, *x, repeat=50).gpu_ms, 4)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                model(*x)
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        out["kernel"] = round(sum(e.time_range.elapsed_us() for e in kernels) / 20 / 1e3, 4)
        out["kernels"] = sorted({e.name[:60] for e in kernels})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
