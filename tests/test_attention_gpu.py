"""The flash-attention kernel on a GPU: tests/test_codegen.py's attention specs (one load_inline)
against a float64 softmax(q k^T * scale + mask) v over odd lengths (1, 77, 130 queries; 1 to 257
keys), 3-D and 4-D operands read through transposed strides, every head-dim layout, 16-bit
storage, causal and bool / additive masks with rows no key takes part in (zeros) and tiles
no key takes part in (skipped), and logits
large enough to overflow a naive exp; then attention modules generated and compared with their
reference, and KernelBench's VisionAttention generated and verified end to end."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.tolerances import PRECISION_TOLERANCES  # noqa: E402
from test_attention import CAUSAL, MHA, RELU  # noqa: E402
from test_codegen import attention_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_coder import attention_reference  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SPECS = {s.name: s for s in attention_specs()}
DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_attention_gpu_tests", list(SPECS.values()))


def reference(q, k, v, scale, causal, mask, relu=False, nonzero=False):
    """The test interpreter's attention (test_coder.attention_reference) in float64."""
    return attention_reference(q.double(), k.double(), v.double(), scale, causal, mask, relu, nonzero)


def operands(spec, lead, lq, lk, seed, logit_scale=1.0):
    """q, k, v [*lead, L, D] as transposed views of [*lead[:-1], L, lead[-1], D] tensors (the
    head-split layout attention code makes), and the spec's mask broadcast from [lq, lk]."""
    torch.manual_seed(seed)
    dt, d = DT[spec.query.dtype], spec.head_dim

    def make(length, scale=1.0):
        t = torch.randn(*lead[:-1], length, lead[-1], d, device="cuda") * scale
        return t.to(dt).transpose(-3, -2)

    q, k, v = make(lq, logit_scale), make(lk), make(lk)
    mask = None
    if spec.mask is not None:
        if spec.mask_nonzero:  # a tril-like float buffer: 0 masks, any other value takes part
            mask = (torch.rand(lq, lk, device="cuda") > 0.3) * torch.rand(lq, lk, device="cuda").add(0.5)
            mask[0] = 0
        elif spec.mask.dtype == "bool":
            mask = torch.rand(lq, lk, device="cuda") > 0.3
            mask[0] = False  # a query no key takes part in
        else:
            mask = torch.randn(lq, lk, device="cuda").to(DT[spec.mask.dtype])
    return q, k, v, mask


def tolerance(spec, want) -> tuple[float, float]:
    """(atol, rtol): fp32 on the FMA units 2e-5 absolute and relative; 16-bit inputs 1e-2 and
    fp32 inputs under a precision opt-in the Verifier's bound for it (tf32 / fp16 1e-2, bf16
    5e-2), its atol x the RMS of the float64 result as the Verifier applies it (attention outputs
    have an RMS of ~0.1-0.2: an absolute 5e-2 would be 5x the bound)."""
    if spec.query.dtype == "float32" and spec.precision == "fp32":
        return 2e-5, 2e-5
    bound = 1e-2 if spec.precision == "fp32" else PRECISION_TOLERANCES[spec.precision].atol
    rms = float(want.square().mean().sqrt()) or 1.0
    return bound * rms, bound


def check(ext, name, lead, lq, lk, seed=0, logit_scale=1.0):
    spec = SPECS[name]
    q, k, v, mask = operands(spec, lead, lq, lk, seed, logit_scale)
    fn = getattr(ext, name)
    got = fn(q, k, v) if mask is None else fn(q, k, v, mask)
    assert got.shape == (*lead, lq, spec.head_dim) and got.dtype == q.dtype and got.is_contiguous()
    want = reference(q, k, v, spec.scale, spec.causal, mask, spec.score == "relu", spec.mask_nonzero)
    # ReLU attention is not normalised: its sums grow with the keys, its tolerance with them
    atol, rtol = tolerance(spec, want)
    grow = lk ** 0.5 if spec.score == "relu" else 1
    torch.testing.assert_close(got.double(), want, atol=atol * grow, rtol=rtol * grow)


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("lead, lq, lk", [((2, 3), 77, 100), ((5,), 130, 257), ((1, 2), 1, 1), ((2, 1), 64, 64)],
                         ids=["4d_77x100", "3d_130x257", "one_query_one_key", "one_tile"])
def test_attention_matches_float64(ext, name, lead, lq, lk):
    if SPECS[name].causal and lq > lk:
        lk = lq  # causal top-left: every query keeps key 0, any lengths work; keep some keys masked
    check(ext, name, lead, lq, lk, seed=lq + lk)


@pytest.mark.parametrize("name", ["att_d32", "att_d64_causal", "att_d128_causal_f16", "att_d160_causal_bf16"])
def test_large_logits_do_not_overflow_the_softmax(ext, name):
    # scores of several hundred: exp would overflow fp32 without the running max
    check(ext, name, (2, 2), 70, 70, seed=3, logit_scale=30.0)


@pytest.mark.parametrize("name", ["att_d64_mask", "att_d96_bf16_mask", "att_d256_mask_tf32"])
@pytest.mark.parametrize("per_batch", [False, True], ids=["one_mask", "mask_per_batch"])
def test_tiles_a_bool_mask_leaves_empty_are_skipped_and_the_result_matches(ext, per_batch, name):
    # a GPT-style tril buffer: the tiles above the diagonal have no key taking part (skipped by the
    # live-tile pre-pass, whose tiles are each body's own: 64 x 64 here, 64 x 32 at head dim 256);
    # per batch: a [B, 1, L, S] mask, each batch its own tiles
    spec = SPECS[name]
    torch.manual_seed(7)
    q, k, v = (torch.randn(2, 3, 300, spec.head_dim, device="cuda").to(DT[spec.query.dtype]) for _ in range(3))
    tril = torch.ones(300, 300, device="cuda").tril().view(1, 1, 300, 300) != 0
    mask = torch.cat([tril, tril.transpose(-2, -1)]) if per_batch else tril
    want = reference(q, k, v, spec.scale, False, mask)
    atol, rtol = tolerance(spec, want)
    torch.testing.assert_close(getattr(ext, name)(q, k, v, mask).double(), want, atol=atol, rtol=rtol)


@pytest.mark.parametrize("name", ["att_d64_tf32", "att_d80_f16", "att_d33_tf32"])
def test_operands_at_an_odd_offset_are_read_without_16_byte_loads(ext, name):
    # views one element into their storage (no 16-byte alignment): the tile loader's element-wise
    # path; and [B, L, H, D] head-split views read in place through their strides
    spec = SPECS[name]
    torch.manual_seed(5)
    dt, d = DT[spec.query.dtype], spec.head_dim
    q, k, v = (torch.randn(2, 70, 3, d + 1, device="cuda").to(dt)[..., 1:].transpose(1, 2) for _ in range(3))
    assert q.data_ptr() % 16 != 0 and q.stride(-1) == 1
    want = reference(q, k, v, spec.scale, spec.causal, None)
    atol, rtol = tolerance(spec, want)
    torch.testing.assert_close(getattr(ext, name)(q, k, v).double(), want, atol=atol, rtol=rtol)


@pytest.mark.parametrize("name", ["att_d112_addmask", "att_d64_addmask_f16", "att_d40_addmask_tf32"])
def test_additive_masks_at_the_float_minimum_and_minus_infinity(ext, name):
    # HuggingFace-style masks use finfo.min: a row masked that way everywhere is uniform in torch
    # (finite scores), where only -inf masks out (zeros here, as the fused kernels give)
    spec = SPECS[name]
    torch.manual_seed(11)
    dt = DT[spec.query.dtype]
    q, k, v = (torch.randn(2, 3, 40, spec.head_dim, device="cuda").to(dt) for _ in range(3))
    mask = torch.randn(40, 40, device="cuda").to(DT[spec.mask.dtype])
    mask[0] = torch.finfo(mask.dtype).min
    mask[1, :20] = torch.finfo(mask.dtype).min
    mask[2] = float("-inf")
    want = reference(q, k, v, spec.scale, False, mask)
    atol, rtol = tolerance(spec, want)
    torch.testing.assert_close(getattr(ext, name)(q, k, v, mask).double(), want, atol=atol, rtol=rtol)


def test_a_head_dim_other_than_the_compiled_one_is_refused(ext):
    q = torch.randn(2, 10, 48, device="cuda")
    with pytest.raises(RuntimeError, match="head dim 32"):
        ext.att_d32(q, q, q)


@pytest.mark.parametrize("text", [CAUSAL, MHA, RELU], ids=["gpt_causal_attention", "multihead_attention",
                                                           "relu_attention"])
def test_attention_modules_match_their_reference(tmp_path, text):
    module_matches_reference(textwrap.dedent(text), {}, tmp_path)


@pytest.mark.parametrize("problem", ["level3/31_VisionAttention.py", "level3/50_ReLUSelfAttention.py"])
def test_kernelbench_attention_problem_generates_and_verifies(tmp_path, problem):
    kernelbench_problem_verifies(problem, tmp_path)
