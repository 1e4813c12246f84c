"""The process Nsight Compute profiles: load a problem, warm up, then run the measured forward
between cudaProfilerStart/Stop so `ncu --profile-from-start off` sees that forward's kernels only.

    python -m kernelstitch.profiler.ncu_target FILE [--module NAME] [--warmup N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run_forward_for_ncu(path: Path, module: str | None, warmup: int) -> int:
    import torch

    from kernelstitch.core.problem import load_problem

    if not torch.cuda.is_available():
        print("ncu_target: no CUDA device", file=sys.stderr)
        return 2
    problem = load_problem(path, module)
    model = problem.build().cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.inputs()]
    with torch.no_grad():
        for _ in range(warmup):  # lazy init (cuBLAS handles, allocator) stays outside the range
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelstitch.profiler.ncu_target")
    parser.add_argument("path", type=Path)
    parser.add_argument("--module", default=None)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    return run_forward_for_ncu(args.path, args.module, args.warmup)


if __name__ == "__main__":
    sys.exit(main())
