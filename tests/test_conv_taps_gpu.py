"""The conv tap-means kernel on a GPU (tests/test_codegen.py's conv_taps specs, one extension)
against the one-hot convolution of tests/conv_taps_reference.py over odd shapes, inputs smaller
than the kernel, rows longer than a warp's unrolled step, channels-last and strided inputs; the
rewritten modules of tests/test_conv_taps.py generated and compared with their references at two
shapes; KernelBench's two problems with a transposed conv under a global mean verified end to
end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from conv_taps_reference import tap_means_reference  # noqa: E402
from test_codegen import conv_taps_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_conv_taps import MODULE, REWRITTEN  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_conv_taps_gpu_tests", conv_taps_specs())


def _layouts(x: torch.Tensor):
    yield "contiguous", x
    yield "channels_last", x.contiguous(memory_format=torch.channels_last)
    wide = torch.randn(x.shape[0], x.shape[1], x.shape[2], 2 * x.shape[3], device=x.device)
    wide[..., ::2] = x
    yield "strided", wide[..., ::2]


@pytest.mark.parametrize("spec", conv_taps_specs(), ids=lambda s: s.name)
@pytest.mark.parametrize("shape", [(2, 3, 9, 7), (1, 5, 1, 1), (3, 2, 17, 300), (4, 64, 32, 32)])
def test_tap_means_match_a_one_hot_convolution(ext, spec, shape):
    torch.manual_seed(sum(shape))
    x = torch.randn(*shape, device="cuda")
    args = (spec.kernel, spec.stride, spec.padding, spec.dilation, spec.output_padding, spec.transposed)
    try:
        want = tap_means_reference(x.double(), *args).float()
    except RuntimeError:  # torch refuses the geometry at this size: so must the binding
        with pytest.raises(RuntimeError, match="empty"):
            getattr(ext, spec.name)(x)
        return
    for label, view in _layouts(x):
        got = getattr(ext, spec.name)(view)
        assert got.shape == want.shape and got.is_contiguous(), label
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=lambda m, label=label: f"{label}: {m}")


def test_the_binding_rejects_what_it_cannot_read(ext):
    name = conv_taps_specs()[0].name
    with pytest.raises(RuntimeError):
        getattr(ext, name)(torch.randn(2, 3, 4, device="cuda"))  # not 4-D
    with pytest.raises(RuntimeError):
        getattr(ext, name)(torch.randn(1, 2, 4, 4, device="cuda").half())


SIZED = MODULE.replace("torch.randn({shape})", "torch.randn(batch, channels, h, w)") + """
batch, channels, h, w = {shape}
"""


@pytest.mark.parametrize("case", sorted(REWRITTEN))
def test_rewritten_module_matches_its_reference_at_two_shapes(case, tmp_path):
    conv, body, shape = REWRITTEN[case]
    source = SIZED.format(conv=conv, body=body, shape=shape, extra_init="pass")
    module_matches_reference(source, {"batch": 5, "h": 37, "w": 150}, tmp_path)


@pytest.mark.parametrize("problem", [
    "level2/44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean.py",
    "level2/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py"])
def test_kernelbench_problem_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)
