"""The gn-stats variant's programs on a GPU (tests/test_group_norm_stats.py's modules): built,
then verified end to end like any candidate (the statistics kernel's group form reading the conv
output as it lies, the normalization in the reduction's prologue)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from test_group_norm_stats import CASES, _write  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("name", CASES)
def test_the_gn_stats_variant_is_accepted_by_the_verifier(name, tmp_path):
    from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
    from kernelstitch.agents.planner.capture import capture
    from kernelstitch.agents.planner.variants import propose_variants
    from kernelstitch.agents.verifier import verify
    from kernelstitch.agents.verifier.declaration import CandidateOrigin
    from test_norms_gpu import QUICK

    path = _write(tmp_path, name)
    variants = {v.name: v for v in propose_variants(capture(path), None)}
    variant = variants["gn-stats"]
    out = tmp_path / "out"
    candidate = Path(write_candidate(code_builtin(variant.plan, path, out / "model_new.py"), out))
    verdict = verify(path, candidate, options=QUICK, origin=CandidateOrigin.BUILTIN)
    print(name, verdict.status, [(r.code, r.detail) for r in verdict.reasons])
    assert verdict.status == "accepted", verdict.reasons




@pytest.fixture(scope="module")
def lse_ext():
    from kernelstitch.agents.coder.codegen import ElementwiseOp, ReductionSpec, TensorArg
    from test_codegen_gpu import load_kernels

    spec = ReductionSpec(
        "gn_lse_nc", "logsumexp", (TensorArg("x", "float32"), TensorArg("m", "float32"), TensorArg("r", "float32")),
        dim=1, keepdim=False, out_dtype="float32",
        prologue=(ElementwiseOp("sub", ("x", "m"), "c"), ElementwiseOp("mul", ("c", "r"), "n"),
                  ElementwiseOp("add", ("n", "x"), "p")), prologue_out="p")
    return load_kernels("ks_gn_lse_gpu_tests", [spec])


@pytest.mark.parametrize("shape", [(16, 64, 33, 35), (3, 7, 9, 10), (2, 40, 3, 4, 5), (4, 128, 16, 16)], ids=str)
def test_a_channels_last_logsumexp_over_channels_reads_per_sample_channel_operands_by_rows(lse_ext, shape):
    """The gn-stats variant's reduction after group statistics (level2/92's logsumexp over the
    channels of a channels-last conv output, (x - mean) * rstd + x in its prologue): the [N, C, 1,
    1] statistics are a base a row plus the column of the [N * S, C] row view (ks_strided_rows),
    so the row kernels run, not the tile kernels; torch's result, NCHW input too."""
    from test_codegen_gpu import _kernels_run, check, poisoned, rnd

    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = rnd(*shape).contiguous(memory_format=fmt)
    ones = [1] * (len(shape) - 2)
    m, r = rnd(shape[0], shape[1], *ones), rnd(shape[0], shape[1], *ones).abs() + 0.5
    want = torch.logsumexp((x - m) * r + x, 1)
    check(poisoned(lse_ext.gn_lse_nc, x, m, r), want, rtol=1e-4, atol=1e-4)
    ran = _kernels_run(lse_ext.gn_lse_nc, x, m, r)
    assert any("_row" in k for k in ran) and not any("_tile" in k for k in ran), ran
    check(poisoned(lse_ext.gn_lse_nc, x.contiguous(), m, r), want, rtol=1e-4, atol=1e-4)
