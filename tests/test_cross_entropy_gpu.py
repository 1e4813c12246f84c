"""cross_entropy on a GPU: the negative log-likelihood kernels (tests/test_codegen.py's nll
specs, one load_inline) fed with torch's logsumexp, against F.nll_loss(log_softmax) over odd
row counts (one block's strided loop, more rows than threads), ignored targets (none, some,
all: 0 / 0 is NaN as in torch), strided logits, bf16; the module of tests/test_cross_entropy.py
generated and compared with its reference; KernelBench's CrossEntropyLoss problem generated
and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_codegen import nll_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_cross_entropy import LOSSES  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
F = torch.nn.functional


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_nll_gpu_tests", nll_specs())


@pytest.mark.parametrize("n, c", [(1, 1), (37, 11), (1025, 7), (5000, 300)])
def test_nll_matches_torch(ext, n, c):
    torch.manual_seed(n + c)
    x = torch.randn(n, c, device="cuda") * 4
    t = torch.randint(0, c, (n,), device="cuda")
    lse = torch.logsumexp(x, 1)
    torch.testing.assert_close(ext.nll_mean(x, t, lse), F.cross_entropy(x, t), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ext.nll_sum(x, t, lse), F.cross_entropy(x, t, reduction="sum", ignore_index=3),
                               rtol=1e-5, atol=1e-3)
    b = x.bfloat16()
    want = F.cross_entropy(b.float(), t, reduction="none")
    torch.testing.assert_close(ext.nll_none_bf16(b, t, torch.logsumexp(b, 1)).float(), want, rtol=2e-2, atol=5e-2)


def test_ignored_targets_count_as_torch_counts_them(ext):
    x = torch.randn(300, 9, device="cuda")
    t = torch.randint(0, 9, (300,), device="cuda")
    t[::3] = -100
    lse = torch.logsumexp(x, 1)
    torch.testing.assert_close(ext.nll_mean(x, t, lse), F.cross_entropy(x, t), rtol=1e-5, atol=1e-5)
    everything = torch.full_like(t, -100)
    assert ext.nll_mean(x, everything, lse).isnan() and F.cross_entropy(x, everything).isnan()


def test_strided_logits_are_read_through_their_strides(ext):
    x = torch.randn(13, 40, device="cuda").t()  # [40, 13], column-major
    t = torch.randint(0, 13, (40,), device="cuda")
    got = ext.nll_mean(x, t, torch.logsumexp(x, 1))
    torch.testing.assert_close(got, F.cross_entropy(x, t), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError):
        ext.nll_mean(x, t[:5], torch.logsumexp(x, 1))


def test_cross_entropy_module_matches_its_reference(tmp_path):
    module_matches_reference(LOSSES, {}, tmp_path)


def test_kernelbench_cross_entropy_generates_and_verifies(tmp_path):
    kernelbench_problem_verifies("level1/95_CrossEntropyLoss.py", tmp_path)
