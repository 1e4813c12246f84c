"""The column loop's batched tail on a GPU (ReductionVariant(colloop_tail_batch=True), off by
default): a strided reduction whose R is not a multiple of 8 loads its last R % 8 values as one
predicated batch, pushed in the same order as the default's one-at-a-time loop, so the results
equal the default kernel's bit for bit and torch's within the usual tolerance."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import ReductionSpec, TensorArg  # noqa: E402
from kernelstitch.agents.coder.codegen.reduction import emit_reduction  # noqa: E402
from kernelstitch.agents.coder.codegen.reduction.context import ReductionVariant  # noqa: E402
from test_codegen_gpu import REF, _kernels_run, check, load_kernels, poisoned  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
KINDS = list(REF) + ["softmax", "log_softmax"]


def _spec(kind: str, name: str) -> ReductionSpec:
    keep = kind not in ("softmax", "log_softmax")
    return ReductionSpec(name, kind, (TensorArg("x", "float32"),), dim=1, keepdim=keep, out_dtype="float32")


@pytest.fixture(scope="module")
def ext():
    batch = ReductionVariant(colloop_tail_batch=True)
    return load_kernels("ks_colloop_tail_gpu_tests", [emit_reduction(_spec(k, f"tb_{k}"), batch) for k in KINDS]
                        + [emit_reduction(_spec(k, f"one_{k}")) for k in KINDS])


# (outer, R, inner): level2/24's min over a depth of 22 as [N * C, D, H * W], tails of 1-7
# values, R under 8 (the tail alone), and a multiple of 8 (no tail)
SHAPES = [(3072, 22, 900), (16, 17, 8192), (4, 15, 40_000), (8, 7, 20_000), (2, 1, 70_000), (6, 24, 12_000)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_the_batched_tail_gives_the_default_kernels_values(ext, kind, shape):
    torch.manual_seed(shape[1])
    x = torch.randn(*shape, device="cuda")
    got = poisoned(getattr(ext, f"tb_{kind}"), x)
    want = getattr(torch, kind)(x, 1) if kind in ("softmax", "log_softmax") else REF[kind](x, 1, True)
    check(got, want, rtol=1e-4, atol=1e-5 * shape[1] ** 0.5 if kind == "sum" else 1e-5)
    torch.testing.assert_close(got, getattr(ext, f"one_{kind}")(x), rtol=0, atol=0, equal_nan=True)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132 and shape[1] > 16:
        assert any(f"tb_{kind}_colloop" in k for k in _kernels_run(getattr(ext, f"tb_{kind}"), x))
