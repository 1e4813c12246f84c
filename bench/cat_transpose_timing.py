"""The transposing concatenation kernel against the output-order walk and PyTorch, on a GPU.

    python bench/cat_transpose_timing.py [--out cat_transpose.json]

At the sizes of the final cats of level3/17 (128 output channels, 128 x 256 x 256) and level3/6
(512 output channels, 10 x 224 x 224), as the three segments of tests/test_codegen.py's cat spec
(bias + ReLU, a copy, a sigmoid; 64 + 32 + 32 and 192 + 256 + 64 channels), built as the
transposing spec and the plain one, channels-last inputs into a contiguous output, timed with
the Verifier's CUDA-event timer (median of 30):

- `transposing`: `cat_fused_tr`, the tiled kernel (read along C, write along the positions);
- `output_order`: `cat_fused`, whose kernel walks the output and gathers each NHWC input at a
  stride of C (what level3/17's channels-last program ran before 2026-11-28);
- `nchw_inputs`: `cat_fused` on contiguous (NCHW) inputs: the same bytes read in order;
- `torch`: relu(x + b) per segment, then torch.cat, on the channels-last inputs.

Each result is compared with torch's (the script fails on a mismatch); effective TB/s counts the
inputs read and the output written once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernel_timing import save, timed_variants, timing_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _measure(torch, ext, timer, runs: int, label: str, n: int, cx: int, cy: int, cz: int,
             h: int, w: int) -> dict:
    cl = torch.channels_last
    x, y, z = (torch.randn(n, c, h, w, device="cuda").contiguous(memory_format=cl) for c in (cx, cy, cz))
    b = torch.randn(cx, 1, 1, device="cuda")
    want = torch.cat([torch.relu(x + b), y, torch.sigmoid(z)], 1)
    nbytes = 2 * want.numel() * 4 + b.numel() * 4
    xc, yc, zc = (t.contiguous() for t in (x, y, z))
    cases = {
        "transposing": lambda: ext.cat_fused_tr(x, b, y, z),
        "output_order": lambda: ext.cat_fused(x, b, y, z),
        "nchw_inputs": lambda: ext.cat_fused(xc, b, yc, zc),
        "torch": lambda: torch.cat([torch.relu(x + b), y, torch.sigmoid(z)], 1),
    }
    row = {"shape": label, "output": list(want.shape)}

    def check(name, got):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=lambda m: f"{name}: {m}")

    row.update(timed_variants(timer, cases, check, nbytes, runs))
    return row


def main() -> int:
    args = timing_args(__doc__)

    import torch
    from test_codegen import cat_specs
    from test_codegen_gpu import load_kernels

    from kernelstitch.core.cuda_timing import CudaTimer

    ext = load_kernels("ks_cat_transpose_timing", [s for s in cat_specs() if s.name in ("cat_fused", "cat_fused_tr")])
    timer = CudaTimer()
    # (name, batch, channels of x, y, z, H, W): x gets the bias + ReLU, y is copied, z sigmoid
    shapes = [("fire (level3/17)", 128, 64, 32, 32, 256, 256),
              ("inception (level3/6)", 10, 192, 256, 64, 224, 224)]
    results = []
    for shape in shapes:
        results.append(_measure(torch, ext, timer, args.runs, *shape))
        print(json.dumps(results[-1]))
        torch.cuda.empty_cache()
    save(args.out, torch.cuda.get_device_name(), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
