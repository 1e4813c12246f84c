"""The persistent recurrent kernel against cuDNN on KernelBench's recurrent layers (level3/35-42).

Each case's module (nn.LSTM / nn.GRU, 6 layers, hidden 256, input 128, batch 10, 512 steps) runs
under PyTorch's defaults (cuDNN's RNNs may use TF32) and as our kernel (fp32), on the same
inputs and weights; the kernel's result is checked against the module in strict fp32 first.

    python bench/recurrent_timing.py --out recurrent.json [--runs 30]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_timing import save, timed_variants, timing_args  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import RecurrentSpec, TensorArg  # noqa: E402

from kernelstitch.core.cuda_timing import CudaTimer  # noqa: E402

# name, cell, bidirectional, batch_first, the problems with this layer
CASES = [
    ("lstm6_bf", "lstm", False, True, "level3/35-37"),
    ("lstm6_bi_bf", "lstm", True, True, "level3/38"),
    ("gru6", "gru", False, False, "level3/39-40"),
    ("gru6_bi", "gru", True, False, "level3/41-42"),
]
LAYERS, STEPS, BATCH, FEATURES, HIDDEN = 6, 512, 10, 128, 256


def _spec(name: str, cell: str, bidirectional: bool, batch_first: bool) -> RecurrentSpec:
    f = lambda n: TensorArg(n, "float32")  # noqa: E731
    dirs = 2 if bidirectional else 1
    return RecurrentSpec(f"ks_{name}", cell, f("x"), f("h0"), LAYERS, dirs, True, batch_first, BATCH,
                         f("c0") if cell == "lstm" else None, tuple(f(f"w{k}") for k in range(LAYERS * dirs * 4)))


def main() -> None:
    args = timing_args(__doc__)
    from test_codegen_gpu import load_kernels

    ext = load_kernels("ks_recurrent_timing", [_spec(*c[:4]) for c in CASES])
    timer = CudaTimer()
    rows = []
    for name, cell, bidirectional, batch_first, problems in CASES:
        torch.manual_seed(0)
        cls = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        module = cls(FEATURES, HIDDEN, LAYERS, batch_first=batch_first, bidirectional=bidirectional).cuda()
        chains = LAYERS * (2 if bidirectional else 1)
        x = torch.randn(*((BATCH, STEPS) if batch_first else (STEPS, BATCH)), FEATURES, device="cuda")
        states = [torch.randn(chains, BATCH, HIDDEN, device="cuda") for _ in range(2 if cell == "lstm" else 1)]
        weights = list(module._flat_weights)
        kernel = getattr(ext, f"ks_{name}")

        def cudnn(x=x, states=states, module=module, cell=cell):
            with torch.no_grad():
                return module(x, tuple(states) if cell == "lstm" else states[0])

        def ours(x=x, states=states, weights=weights, kernel=kernel):
            return kernel(x, states, weights)

        def check(variant: str, result, cudnn=cudnn, cell=cell) -> None:
            if variant != "ours":
                return
            torch.backends.cudnn.allow_tf32 = False
            want = cudnn()
            torch.backends.cudnn.allow_tf32 = True
            want = [want[0], *(want[1] if cell == "lstm" else (want[1],))]
            for g, w in zip(result, want):
                torch.testing.assert_close(g, w, atol=1e-3, rtol=1e-3)

        timed = timed_variants(timer, {"cudnn": cudnn, "ours": ours}, check, 1, args.runs)
        steps = STEPS + LAYERS - 1 if not bidirectional else STEPS * LAYERS
        row = {"case": name, "problems": problems, "cudnn_ms": timed["cudnn"]["ms"], "ours_ms": timed["ours"]["ms"],
               "speedup": round(timed["cudnn"]["ms"] / timed["ours"]["ms"], 2),
               "us_per_dependent_step": round(timed["ours"]["ms"] * 1e3 / steps, 2)}
        print(row, flush=True)
        rows.append(row)
    save(args.out, torch.cuda.get_device_name(), rows, layers=LAYERS, steps=STEPS, batch=BATCH,
         features=FEATURES, hidden=HIDDEN)


if __name__ == "__main__":
    main()
