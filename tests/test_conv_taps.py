"""The spatial mean of a convolution computed from its kernel taps (rewrites._conv_spatial_mean,
kernelstitch.conv_tap_means; CPU): where the planner rewrites and where it must not, the
generated programs against their references with every kernel interpreted in torch, the kernel's
index ranges run on the host (nvcc) against a one-hot convolution, and the binding's output sizes
against torch's."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from conv_taps_reference import tap_means_reference
from kernelstitch.agents.coder.codegen import ConvTapMeansSpec, TensorArg, emit
from kernelstitch.agents.coder.codegen.conv_taps import _output_size
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_coder import interpreted_problem

F = torch.nn.functional

MODULE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{conv}
        {extra_init}

    def forward(self, x):
        y = self.conv(x)
        {body}
        return y

def get_inputs():
    return [torch.randn({shape})]

def get_init_inputs():
    return []
"""

# (conv, body, input shape): the rewrite applies to each
REWRITTEN = {
    "t3s2_scalar_keepdim": ("ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)",
                            "y = torch.mean(y * 0.5, dim=[2, 3], keepdim=True)", "2, 4, 9, 7"),
    "t3_plain_then_more": ("ConvTranspose2d(3, 5, 3)",
                           "y = torch.mean(y, dim=(2, 3), keepdim=True) + 1.0\n        y = torch.logsumexp(y, 1)",
                           "3, 3, 6, 8"),
    "t4x2_dilated_div": ("ConvTranspose2d(2, 3, (4, 2), stride=(3, 2), padding=(2, 0), output_padding=(1, 1), "
                         "dilation=(2, 1), bias=False)", "y = (y / 3.0).mean((-1, -2))", "2, 2, 5, 4"),
    "c3p1_adaptive": ("Conv2d(3, 4, 3, padding=1)", "y = torch.nn.functional.adaptive_avg_pool2d(y, 1)",
                      "2, 3, 7, 5"),
    "c5x3_strided": ("Conv2d(2, 3, (5, 3), stride=(3, 2), padding=(2, 1), dilation=(1, 2))",
                     "y = (y * 2.0).mean(dim=(3, 2))", "2, 2, 11, 9"),
}
# (conv, body): the rewrite must not apply
KEPT = {
    "nonlinear_between": ("ConvTranspose2d(4, 6, 3)", "y = torch.relu(y).mean((2, 3))"),
    "one_spatial_dim": ("ConvTranspose2d(4, 6, 3)", "y = y.mean(2)"),
    "grouped": ("Conv2d(4, 6, 3, groups=2)", "y = y.mean((2, 3))"),
    "conv_read_twice": ("Conv2d(4, 6, 3)", "y = y.mean((2, 3), keepdim=True) + y"),
    "too_many_taps": ("Conv2d(4, 6, 9, padding=4)", "y = y.mean((2, 3))"),
}


def _source(conv: str, body: str, shape: str = "2, 4, 9, 9", extra_init: str = "") -> str:
    return MODULE.format(conv=conv, body=body, shape=shape, extra_init=extra_init or "pass")


def _plan(tmp_path: Path, text: str):
    path = tmp_path / "problem.py"
    path.write_text(text)
    return plan_builtin(capture(path, "Model", None))


@pytest.mark.parametrize("case", sorted(REWRITTEN))
def test_rewritten_program_matches_its_reference(case, tmp_path):
    conv, body, shape = REWRITTEN[case]
    candidate, reference, new, inputs = interpreted_problem(tmp_path, _source(conv, body, shape))
    steps = candidate.plan.steps
    taps = [s for s in steps if s.spec and s.spec.get("type") == "conv_taps"]
    assert len(taps) == 1 and taps[0].technique == "algebraic_rewrite"
    assert not any("conv" in n for s in steps for n in s.nodes)  # the convolution itself never runs
    with torch.no_grad():
        want, got = reference(*inputs), new(*inputs)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # another batch and spatial size: the program reads its sizes at run time
    other = [torch.randn(3, inputs[0].shape[1], inputs[0].shape[2] + 3, inputs[0].shape[3] + 2)]
    with torch.no_grad():
        torch.testing.assert_close(new(*other), reference(*other), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(KEPT))
def test_no_rewrite_where_the_mean_is_not_linear_in_one_conv(case, tmp_path):
    conv, body = KEPT[case]
    plan = _plan(tmp_path, _source(conv, body))
    assert not any(s.spec and s.spec.get("type") == "conv_taps" for s in plan.steps)
    assert any("conv" in s.description for s in plan.steps)


def test_plan_states_the_rewrite_and_skips_the_conv(tmp_path):
    conv, body, shape = REWRITTEN["t3s2_scalar_keepdim"]
    plan = _plan(tmp_path, _source(conv, body, shape))
    (taps,) = [s for s in plan.steps if s.spec and s.spec.get("type") == "conv_taps"]
    assert "the conv output is never computed" in taps.description
    assert taps.spec["kernel"] == [3, 3] and taps.spec["stride"] == [2, 2] and taps.spec["transposed"]
    assert not any("conv_transpose2d" in n for s in plan.steps for n in s.nodes)


def _spec(kernel, stride, padding, dilation, output_padding, transposed) -> ConvTapMeansSpec:
    return ConvTapMeansSpec("taps_host", TensorArg("x", "float32"), kernel, stride, padding, dilation,
                            output_padding, transposed)


GEOMETRIES = [  # kernel, stride, padding, dilation, output_padding, transposed
    ((3, 3), (2, 2), (1, 1), (1, 1), (1, 1), True),
    ((3, 3), (1, 1), (0, 0), (1, 1), (0, 0), True),
    ((4, 2), (3, 2), (2, 0), (2, 1), (1, 1), True),
    ((5, 5), (2, 3), (4, 1), (1, 1), (1, 2), True),  # padding beyond the kernel's reach on one side
    ((3, 3), (1, 1), (1, 1), (1, 1), (0, 0), False),
    ((3, 3), (2, 2), (0, 0), (1, 1), (0, 0), False),
    ((5, 3), (3, 2), (2, 1), (1, 2), (0, 0), False),
    ((2, 2), (2, 2), (3, 3), (1, 1), (0, 0), False),  # taps that fall on padding for most outputs
]


def _torch_output_size(x_shape, g) -> tuple[int, int]:
    kernel, stride, padding, dilation, output_padding, transposed = g
    x = torch.zeros(x_shape)
    if transposed:
        y = F.conv_transpose2d(x, torch.zeros(x_shape[1], 1, *kernel), None, stride, padding, output_padding, 1,
                               dilation)
    else:
        y = F.conv2d(x, torch.zeros(1, x_shape[1], *kernel), None, stride, padding, dilation)
    return tuple(y.shape[2:])


def _evaluate(cpp: str) -> int:
    """The binding's integer size expression in Python (C++'s `a ? b : c`, `/` of non-negatives)."""
    python = re.sub(r"^\((.*) >= 0 \? (.*) : 0\)$", r"((\2) if (\1) >= 0 else 0)", cpp).replace("/", "//")
    assert re.fullmatch(r"[0-9 ()+\-*/<>=ifels]+", python), python
    return eval(python)  # noqa: S307 - digits and operators only (checked above)


@pytest.mark.parametrize("g", GEOMETRIES, ids=str)
def test_binding_output_sizes_are_torchs(g):
    kernel, stride, padding, dilation, output_padding, transposed = g
    for h, w in ((9, 7), (1, 1), (13, 16), (2, 3)):
        try:
            want = _torch_output_size((1, 1, h, w), g)
        except RuntimeError:  # torch refuses: the output would be empty
            want = None
        got = tuple(_evaluate(_output_size(str(size), k, s, p, d, op, transposed))
                    for size, k, s, p, d, op in zip((h, w), kernel, stride, padding, dilation, output_padding))
        if want is None:
            assert min(got) <= 0
        else:
            assert got == want


_HARNESS = textwrap.dedent("""
    // The kernel's own index ranges on the host: each tap's input summed over its positions.
    int main() {
      long long N, C, H, W, Ho, Wo;
      if (scanf("%lld %lld %lld %lld %lld %lld", &N, &C, &H, &W, &Ho, &Wo) != 6) return 2;
      std::vector<double> x(N * C * H * W);
      for (auto& v : x) if (scanf("%lf", &v) != 1) return 3;
      constexpr int KH = taps_host_KH, KW = taps_host_KW;
      for (long long c = 0; c < C; ++c)
        for (long long n = 0; n < N; ++n)
          for (int a = 0; a < KH; ++a)
            for (int b = 0; b < KW; ++b) {
              int64_t lo_h, hi_h, lo_w, hi_w;
              taps_host_range(a, H, Ho, SH, PH, DH, lo_h, hi_h);
              taps_host_range(b, W, Wo, SW, PW, DW, lo_w, hi_w);
              double sum = 0;
              for (long long i = 0; i < H; ++i)
                for (long long j = 0; j < W; ++j)
                  if (taps_host_holds<taps_host_SH>(i, lo_h, hi_h) && taps_host_holds<taps_host_SW>(j, lo_w, hi_w))
                    sum += x[((n * C + c) * H + i) * W + j];
              printf("%.17g\\n", sum / (double)(Ho * Wo));
            }
      return 0;
    }
""")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("g", GEOMETRIES, ids=str)
def test_kernel_index_ranges_on_the_host_match_a_one_hot_convolution(g, tmp_path):
    kernel, stride, padding, dilation, output_padding, transposed = g
    cuda = emit(_spec(*g)).cuda
    constants = "".join(f"#define {n} {v}\n" for n, v in zip(
        ("SH", "SW", "PH", "PW", "DH", "DW"), stride + padding + dilation))
    source = tmp_path / "harness.cu"
    source.write_text("#include <cstdio>\n#include <vector>\n" + cuda + "\n" + constants + _HARNESS)
    binary = tmp_path / "harness"
    built = subprocess.run(["nvcc", "-std=c++17", "-O1", "-gencode=arch=compute_90a,code=sm_90a", "-o", str(binary),
                            str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    torch.manual_seed(0)
    for n, c, h, w in ((2, 3, 9, 7), (1, 2, 4, 13)):
        x = torch.randn(n, c, h, w, dtype=torch.float64)
        ho, wo = _torch_output_size((n, c, h, w), g)
        stdin = f"{n} {c} {h} {w} {ho} {wo}\n" + " ".join(f"{v:.17g}" for v in x.flatten().tolist())
        run = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        got = torch.tensor([float(v) for v in run.stdout.split()], dtype=torch.float64)
        want = tap_means_reference(x, kernel, stride, padding, dilation, output_padding, transposed).flatten()
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_emitter_refuses_what_the_kernel_cannot_take():
    with pytest.raises(ValueError, match="taps"):
        emit(_spec((8, 7), (1, 1), (0, 0), (1, 1), (0, 0), True))
    with pytest.raises(ValueError, match="float32"):
        emit(ConvTapMeansSpec("t", TensorArg("x", "float16"), (3, 3), (1, 1), (0, 0), (1, 1), (0, 0), True))
    text = emit(_spec((3, 3), (2, 2), (1, 1), (1, 1), (1, 1), True)).binding
    assert re.search(r"TORCH_CHECK\(Ho > 0 && Wo > 0", text)
