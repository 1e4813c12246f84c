"""The direct convolution + epilogue kernel (ConvEpilogueSpec, the search's `conv-direct`) against
cuDNN + an epilogue, on a GPU: level 2's few-channel 3 x 3 convolutions at their sizes, with a
bias + ReLU chain.  Columns, each checked against `cudnn` first (fp32 tolerance of a TF32
convolution: rtol/atol 1e-2, since cuDNN runs TF32 under PyTorch's defaults):

- `direct`: our kernel, one pass (NCHW in, NCHW out): the persistent form (resident blocks walk
  the tiles, the next tile's input copied with cp.async while this one computes; the default
  for C_in <= 8);
- `direct_tiles`: the block-a-tile form (`emit_conv_epilogue(spec, persistent=False)`);
- `direct_vec`: the persistent form copying input rows in 16-byte pieces
  (`emit_conv_epilogue(spec, vector_copy=True)`, not yet a default);
- `cudnn`: F.conv2d (PyTorch's defaults: NCHW, TF32 allowed) then relu(y + b) in PyTorch;
- `cudnn_nhwc`: the same on a channels-last copy of the input (the plan's default layout).

TFLOP/s counts the convolution's 2 * C_in * kh * kw FLOPs an output value.

    python bench/conv_epilogue_timing.py [--out results.json] [--runs N]
"""

from __future__ import annotations

import sys

from kernel_timing import load_kernel_extension, run_cases, timed_variants

# label, (N, C_in, C_out, H, W)
CASES = [
    ("level2/87 / 82 / 67 [128, 8, 256, 256] -> 64", (128, 8, 64, 256, 256)),
    ("level2/69 / 73 / 85 / 92 [128, 8, 128, 128] -> 64", (128, 8, 64, 128, 128)),
    ("level2/65 [128, 8, 384, 384] -> 64", (128, 8, 64, 384, 384)),
    ("level2/25 [128, 16, 256, 256] -> 64", (128, 16, 64, 256, 256)),
]


def build(torch):
    from kernelstitch.agents.coder.codegen import (
        ElementwiseOp,
        ElementwiseSpec,
        TensorArg,
    )
    from kernelstitch.agents.coder.codegen.conv_epilogue import emit_conv_epilogue
    from kernelstitch.agents.plan.kernel_spec import ConvEpilogueSpec, conv_epilogue_staged_channels

    chain = ElementwiseSpec(name="e", inputs=(TensorArg("y", "float32"), TensorArg("b", "float32")),
                            ops=(ElementwiseOp("add", ("y", "b"), "t"), ElementwiseOp("relu", ("t",), "o")),
                            outputs=("o",), out_dtype="float32")
    forms = []
    for name, keywords in (("direct_k3", {}), ("direct_tiles_k3", {"persistent": False}),
                           ("direct_vec_k3", {"vector_copy": True})):
        spec = ConvEpilogueSpec(name, TensorArg("x", "float32"), TensorArg("w", "float32"), (3, 3), (1, 1),
                                (0, 0), chain, 0, conv_epilogue_staged_channels((3, 3), (1, 1), 8))
        forms.append(emit_conv_epilogue(spec, **keywords))
    return load_kernel_extension("ks_conv_epilogue_timing", forms)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    label, (n, cin, cout, h, w) = CASES[k]
    F = torch.nn.functional
    x = torch.randn(n, cin, h, w, device="cuda")
    wt = torch.randn(cout, cin, 3, 3, device="cuda") * 0.2
    b = torch.randn(cout, 1, 1, device="cuda")

    def cudnn(x, wt, b):
        return torch.relu(F.conv2d(x, wt) + b)

    def cudnn_nhwc(x, wt, b):
        return torch.relu(F.conv2d(x.contiguous(memory_format=torch.channels_last), wt) + b).contiguous()

    with torch.no_grad():
        want = cudnn(x, wt, b)

    def check(form, got):
        if not torch.allclose(got, want, rtol=1e-2, atol=1e-2):
            raise SystemExit(f"{form} differs from cuDNN on {label}")

    row = {"case": label, "shape": [n, cin, cout, h, w]}
    variants = {"direct": ext.direct_k3, "direct_tiles": ext.direct_tiles_k3, "direct_vec": ext.direct_vec_k3,
                "cudnn": cudnn, "cudnn_nhwc": cudnn_nhwc}
    nbytes = (x.numel() + want.numel()) * 4
    with torch.no_grad():
        row.update(timed_variants(timer, variants, check, nbytes, runs, x, wt, b))
    flops = 2 * want.numel() * cin * 9
    for form in variants:
        row[form]["tflop_per_s"] = round(flops / (row[form]["ms"] * 1e-3) / 1e12, 1)
    return [row]


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
