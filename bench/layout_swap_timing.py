"""The channels-last layout copies (`ks_layout_swap`) against an earlier revision's kernel, PyTorch's
copy and Inductor's, on a GPU.

    python bench/layout_swap_timing.py [--baseline REV] [--out layout_swap.json] [--runs 30]

Shapes are level 2's convolution inputs and outputs (8, 3 and 4 channels take the short-side
kernel, 16 and 64 the tiled vector kernels), both directions: NCHW -> NHWC (`to_cl`, before a
channels-last convolution) and back (`to_nchw`).  Columns, each timed with the Verifier's
CUDA-event timer (median of --runs):

- `current`: this tree's ks_layout_swap;
- `baseline`: REV's cuda/layout/swap.cu (default HEAD; or a path to such a file) built beside it under another name, with
  this tree's prelude and binding (the binding must not have changed between the two);
- `torch`: `t.contiguous(memory_format=...)`;
- `inductor`: the same copy through torch.compile (a Triton kernel).

Every result is compared with PyTorch's (the script fails on a mismatch).  TB/s counts the tensor
read once and written once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernel_timing import load_kernel_extension, save, timed_variants, timing_args

ROOT = Path(__file__).resolve().parents[1]
SWAP = "agents/coder/codegen/cuda/layout/swap.cu"
SHAPES = [(128, 8, 256, 256), (128, 3, 256, 256), (64, 4, 128, 128), (128, 16, 128, 128), (64, 64, 128, 128)]


def baseline_source(rev: str, name: str):
    """REV's swap kernel as a KernelSource called `name` (this tree's prelude and binding)."""
    from kernelstitch.agents.coder.codegen import templates
    from kernelstitch.agents.coder.codegen.layout_swap import emit_layout_swap

    if Path(rev).is_file():  # a copy of the file (a machine without the git history)
        text = Path(rev).read_text(encoding="utf-8")
    else:
        text = subprocess.run(["git", "show", f"{rev}:{SWAP}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout
    text = text.replace('#include "../ks_prelude.cuh"\n', templates.source("ks_prelude.cuh"))
    text = text.replace("KsVec4", "KsVec4Base")  # a helper type both files define
    return emit_layout_swap(name, kernel_text=text)


def build(rev: str):
    from kernelstitch.agents.coder.codegen.layout_swap import emit_layout_swap

    return load_kernel_extension("ks_layout_swap_timing", [emit_layout_swap(), baseline_source(rev, "ks_swap_base")])


def measure(torch, ext, timer, runs: int, shape: tuple[int, ...], to_cl: bool) -> dict:
    cl = torch.channels_last
    x = torch.randn(*shape, device="cuda")
    if not to_cl:
        x = x.contiguous(memory_format=cl)
    target = cl if to_cl else torch.contiguous_format
    want = x.contiguous(memory_format=target)
    copy = torch.compile(lambda t: t.contiguous(memory_format=target))
    cases = {
        "current": lambda: ext.ks_layout_swap(x, to_cl),
        "baseline": lambda: ext.ks_swap_base(x, to_cl),
        "torch": lambda: x.contiguous(memory_format=target),
        "inductor": lambda: copy(x),
    }
    nbytes = 2 * x.numel() * x.element_size()
    row = {"shape": list(shape), "direction": "to_cl" if to_cl else "to_nchw"}

    def check(name, got):
        if not torch.equal(got, want) or got.stride() != want.stride():
            raise SystemExit(f"{name} differs from PyTorch's copy on {shape} ({row['direction']})")

    row.update(timed_variants(timer, cases, check, nbytes, runs))
    return row


def main() -> int:
    args = timing_args(__doc__, baseline={"default": "HEAD",
                                          "help": "git revision of swap.cu to compare with, or a copy of that file"})

    import torch

    from kernelstitch.core.cuda_timing import CudaTimer

    ext = build(args.baseline)
    timer = CudaTimer()
    results = []
    for shape in SHAPES:
        for to_cl in (True, False):
            results.append(measure(torch, ext, timer, args.runs, shape, to_cl))
            print(json.dumps(results[-1]), flush=True)
            torch.cuda.empty_cache()
    save(args.out, torch.cuda.get_device_name(), results, baseline=args.baseline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
