"""Issue 22 (pooling): max / avg / adaptive-avg pooling over 1-3 spatial dims planned as fused
kernels with the elementwise ops around them, global adaptive average pooling as a mean
reduction, and the pooling spec's JSON and validation.  Plans and emitted sources on the CPU;
tests/test_pool_gpu.py runs the kernels and these modules on a GPU against PyTorch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.coder.codegen.pool import emit_pool
from kernelstitch.agents.plan.graph import Node, NodeRef
from kernelstitch.agents.plan.kernel_spec import PoolSpec, spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.ops import pool_params
from test_codegen import pool_specs
from test_norms import _HEADER, write

# conv -> (bias) - v -> hardswish -> max_pool2d -> mish (level2/35's program)
CONV_MAX_POOL = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        x = F.hardswish(self.conv(x) - 0.5)
        return F.mish(self.pool(x))

batch, cin, cout, height, width = 2, 3, 8, 19, 23

def get_inputs():
    return [torch.randn(batch, cin, height, width)]

def get_init_inputs():
    return [cin, cout]
'''

# conv3d -> * s -> avg_pool3d (ceil mode, padding, not counting the padding) -> + per-channel
# bias (level2/50's program, with torch's harder options)
CONV3D_AVG_POOL = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1, 1))

    def forward(self, x):
        x = F.avg_pool3d(self.conv(x) * 0.5, 3, stride=2, padding=1, ceil_mode=True,
                         count_include_pad=False)
        return x + self.bias

batch, cin, cout, size = 2, 2, 4, 11

def get_inputs():
    return [torch.randn(batch, cin, size, size + 1, size + 2)]

def get_init_inputs():
    return [cin, cout]
'''

# dilated, padded 1-D max pooling of a GEMM's output (level2/55's shape of program) and an
# avg_pool1d with the default stride
LINEAR_POOL1D = _HEADER + '''
class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)

    def forward(self, x):
        h = torch.relu(self.fc(x)).unsqueeze(1)
        a = F.max_pool1d(h, 3, stride=2, padding=1, dilation=2)
        b = F.avg_pool1d(h, 4)
        return a.squeeze(1), b.squeeze(1) * 2.0

batch, fin, fout = 3, 16, 37

def get_inputs():
    return [torch.randn(batch, fin)]

def get_init_inputs():
    return [fin, fout]
'''

# adaptive pooling: to a grid that does not divide the input (windows overlap), and to 1 x 1
# (a mean over the spatial dims)
ADAPTIVE = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = F.adaptive_avg_pool2d(torch.tanh(x), (5, 3))
        b = F.adaptive_avg_pool2d(x, 1) + 1.0
        return a, b

batch, c, h, w = 2, 6, 13, 11

def get_inputs():
    return [torch.randn(batch, c, h, w)]

def get_init_inputs():
    return []
'''

# fp16, unbatched input ([C, H, W]), overlapping windows
HALF_UNBATCHED = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(F.max_pool2d(x * 2.0, 3, stride=1, padding=1))

c, h, w = 5, 9, 10

def get_inputs():
    return [torch.randn(c, h, w).half()]

def get_init_inputs():
    return []
'''

# the indices of a max pooling are not computed by the built-in kernel: PyTorch keeps it
WITH_INDICES = _HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return values + 1.0, indices

def get_inputs():
    return [torch.randn(2, 3, 8, 8)]

def get_init_inputs():
    return []
'''

# torch.max / torch.min along a dim, values only (export keeps an unread getitem of the indices):
# amax / amin reductions with their neighbours (level2/98's and level2/32's programs)
MIN_MAX_VALUES = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = torch.max(torch.relu(x) * 2.0, dim=1).values
        b = torch.min(x, dim=-1, keepdim=True)[0] + 1.0
        return a, b

batch, c, w = 3, 7, 33

def get_inputs():
    return [torch.randn(batch, c, w)]

def get_init_inputs():
    return []
'''

# the indices are read: PyTorch keeps the op
MAX_WITH_INDICES_READ = _HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        values, indices = torch.max(x, dim=1)
        return values * 2.0, indices

def get_inputs():
    return [torch.randn(4, 5)]

def get_init_inputs():
    return []
'''

CASES = {
    "conv_max_pool": (CONV_MAX_POOL, {"height": 16, "width": 16}),
    "conv3d_avg_pool": (CONV3D_AVG_POOL, {"size": 8}),
    "linear_pool1d": (LINEAR_POOL1D, {"batch": 5}),
    "adaptive": (ADAPTIVE, {"h": 20, "w": 7}),
    "half_unbatched": (HALF_UNBATCHED, {"h": 16, "w": 3}),
    "min_max_values": (MIN_MAX_VALUES, {"batch": 2, "w": 64}),
}


def _plan(tmp_path, source):
    return plan_builtin(capture(write(tmp_path, source)))


def _pool_steps(plan) -> list[PoolSpec]:
    return [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "pool"]


# ---------------------------------------------------------------- specs


@pytest.mark.parametrize("spec", pool_specs(), ids=lambda s: s.name)
def test_pool_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


@pytest.mark.parametrize("change, message", [
    ({"nd": 4}, "spatial dims"),
    ({"stride": (2,)}, "stride needs 3 values"),
    ({"kind": "avg", "dilation": (1, 2, 1)}, "no dilation"),
    ({"plane_inputs": ("x",)}, "inputs\\[0\\]"),
    ({"epilogue_inputs": ("nope",)}, "not one of the inputs"),
    ({"kind": "adaptive_avg", "output_size": (2, 2)}, "3 output sizes"),
    ({"kind": "median"}, "unknown pooling kind"),
])
def test_emitter_rejects_inconsistent_specs(change, message):
    from dataclasses import replace

    with pytest.raises(ValueError, match=message):
        emit(replace(pool_specs()[0], **change))


def test_emitted_kernel_reads_plane_operands_once_per_window_and_taps_through_descriptors():
    spec = pool_specs()[0]  # inputs x (taps), b (plane), y (taps), e (epilogue)
    cuda = emit(spec).cuda
    loop = cuda[cuda.index("for (int64_t id"):cuda.index("acc = ks_pool_finish<KIND>(")]
    before = cuda[cuda.index("const int64_t plane ="):cuda.index("for (int64_t id")]
    assert "ks_offset(d1, plane * in_plane)" in before and "d1" not in loop  # bias: once per window
    assert "ks_offset(d2, ((plane * g.in[0] + id)" in loop  # full-size y: every tap
    assert "ks_offset(d3, o)" in cuda  # epilogue operand at the (contiguous) output index
    binding = emit(spec).binding
    assert "ChannelsLast3d" in binding and "{2, 3, 2}" in binding and "--g.out[k]" in binding


def _window(kind="avg", nd=2, kernel=2, stride=2, padding=0, dtype="float32", taps=1, dilation=1) -> PoolSpec:
    from kernelstitch.agents.plan.kernel_spec import ElementwiseOp, TensorArg

    inputs = (TensorArg("x", dtype),) + ((TensorArg("y", "float32"),) if taps > 1 else ())
    prologue = (ElementwiseOp("mul", ("x", "y"), "t"),) if taps > 1 else ()
    return PoolSpec("pw", kind, inputs, nd, dtype, kernel=(kernel,) * nd, stride=(stride,) * nd,
                    padding=(padding,) * nd, dilation=(dilation,) * nd, prologue=prologue,
                    prologue_out="t" if taps > 1 else "")


@pytest.mark.parametrize("spec, window", [
    (_window(), (2, 2, 2, 2, 0, 0, 1, 1)),  # level3/13's 2 x 2 / stride 2
    (_window("max", 2, 3, 2, 1), (3, 3, 2, 2, 1, 1, 1, 1)),
    (_window("max", 1, 8, 1, 4, dilation=3), (1, 8, 1, 1, 0, 4, 1, 3)),  # level1/41: a row of height 1
    (_window("avg", 2, 11, 11), None),  # rows of 11 x 11: past the registers' bound
    (_window("avg", 2, 7, 2), None),  # 7 rows of 13 values: past the window bound
    (_window("max", 3, 2, 2), None),  # 3-D
    (_window(dtype="float16"), None),
    (_window(taps=2), None),  # a full-size operand read at every tap
])
def test_the_plane_kernel_is_emitted_for_fixed_float32_windows_within_its_bounds(spec, window):
    """Contiguous inputs of fixed 1-D / 2-D float32 windows whose every tap reads only the input
    get the plane kernel (cuda/pool/kernel.cu; its loads in registers: at most 28 values a row
    and 64 a window), with its window as compile-time constants; the binding chooses it at run
    time (contiguous, >= 512 outputs a plane)."""
    from kernelstitch.agents.coder.codegen.pool import _plane_window

    vec4 = int(spec.inputs[0].dtype == "float32" and len(spec.inputs) == 1)
    assert _plane_window(spec, vec4) == window
    kernel = emit(spec)
    assert ("#if 1\ntemplate <int KIND, bool VL>" in kernel.cuda) == (window is not None)
    assert ("const bool plane_ok = 1 &&" in kernel.binding) == (window is not None)
    if window:
        kh, kw, sh, sw, ph, pw, dh, dw = window
        assert f"KH = {kh}, KW = {kw}, SH = {sh}, SW = {sw}, PH = {ph}, PW = {pw}" in kernel.cuda
        # 16-byte loads where a span's first load lands on a multiple of 4: paddings of 0, 4, 8...
        assert f"const bool vl = plane_ok && {int(pw % 4 == 0)} &&" in kernel.binding
        old = emit_pool(spec, plane_vl_padded=False)  # the form it replaced: unpadded rows only
        assert f"const bool vl = plane_ok && {int(pw == 0)} &&" in old.binding


@pytest.mark.parametrize("spec, window", [
    (_window("max", 2, 3, 1, 1), (4, 3, 3, 1, 1, 1, 1, 1, 1)),  # level3/6's 3 x 3 / stride 1
    # windows reading each column of a row fewer than twice keep the cl4 kernels (measured faster)
    (_window("max", 2, 3, 2), None),  # AlexNet's 3 x 3 / stride 2: 1.5 windows a column
    (_window("max", 2, 2, 2), None),  # level2/35's 2 x 2 / stride 2
    (_window("max", 2, 4, 4), None),  # level2/82's 4 x 4 / stride 4
    (_window("max", 2, 3, 5), None),
    (_window("max", 2, 2, 1), (4, 2, 2, 1, 1, 0, 0, 1, 1)),  # 2 windows a column
    (_window("max", 2, 5, 2), (3, 5, 5, 2, 2, 0, 0, 1, 1)),  # stride 2: 4 columns span 11, 3 span 9
    (_window("max", 2, 3, 1, 1, dilation=2), (4, 3, 3, 1, 1, 1, 1, 2, 2)),
    (_window("max", 2, 2, 2, dilation=3), None),  # 2 taps 3 apart at stride 2: every column read once
    (_window("max", 2, 2, 2, dilation=2), (4, 2, 2, 2, 2, 0, 0, 2, 2)),  # even columns, each read twice
    (_window("avg", 2, 5, 1, 2), (4, 5, 5, 1, 1, 2, 2, 1, 1)),
    (_window("avg", 2, 6, 1), None),  # 36 taps: past the unrolled window bound
    (_window("avg", 2, 11, 11), None),
    (_window("max", 3, 2, 2), None),  # 3-D
    (_window("max", 1, 3, 2), None),  # 1-D: never channels-last
    (_window(dtype="float16"), None),
    (_window(taps=2), None),
])
def test_the_row_form_is_emitted_for_fixed_2d_float32_windows(spec, window):
    """Channels-last float32 inputs of fixed 2-D max / avg windows of <= 27 taps whose rows read
    each column at least twice get the row form of the 4-channel kernels (cl4r / cl4rt: V columns x
    4 channels a thread, V = 4 or fewer where a window row's span of float4s would pass 9); the
    binding checks 32-bit sample offsets."""
    from kernelstitch.agents.coder.codegen.pool import _row_window

    vec4 = int(spec.inputs[0].dtype == "float32" and len(spec.inputs) == 1)
    got = _row_window(spec, vec4)
    assert got == window
    kernel = emit(spec)
    assert ("#if 1\ntemplate <int KIND, int R, int V, int KH" in kernel.cuda) == (got is not None)
    assert ("const bool row_ok = 1 && cl4" in kernel.binding) == (got is not None)
    if got:
        targs = ", ".join(map(str, got))
        assert f"_cl4r_kernel<{KIND_IDS[spec.kind]}, {targs}>" in kernel.cuda
        assert f"_cl4rt_kernel<{KIND_IDS[spec.kind]}, {targs}>" in kernel.cuda


@pytest.mark.parametrize("spec, window", [
    # kept channels-last (NHWC out): non-overlapping, undilated windows of <= 4 taps take the row
    # form too (the 2x2 / stride-2 windows measured)
    (replace(_window("max", 2, 2, 2), keep_channels_last=True), (4, 2, 2, 2, 2, 0, 0, 1, 1)),
    (replace(_window("avg", 2, 2, 2), keep_channels_last=True), (4, 2, 2, 2, 2, 0, 0, 1, 1)),
    (replace(_window("max", 2, 2, 2, padding=1), keep_channels_last=True), (4, 2, 2, 2, 2, 1, 1, 1, 1)),
    (replace(_window("max", 2, 2, 2, dilation=3), keep_channels_last=True), None),  # dilated: not measured
    # larger kept windows keep the rule (AlexNet's 3 x 3 / stride 2, level2/82's 4 x 4 / stride 4)
    (replace(_window("max", 2, 3, 2), keep_channels_last=True), None),
    (replace(_window("max", 2, 4, 4), keep_channels_last=True), None),
    (replace(_window("max", 3, 2, 2), keep_channels_last=True), None),  # 3-D
])
def test_a_kept_channels_last_pool_of_few_taps_takes_the_row_form(spec, window):
    """A pool kept channels-last with a 2x2 / stride-2 window gets the row form though its rows
    read each column once (level2/35's and 46's 2x2 pools ran 0.371 / 0.377 ms in cl4r against
    0.550 / 0.533 in cl4 on an H200); the same window with a contiguous output keeps the cl4t
    kernel."""
    from kernelstitch.agents.coder.codegen.pool import _row_window

    assert _row_window(spec, 1) == window
    assert _row_window(replace(spec, keep_channels_last=False), 1) is None
    if window:  # bench/pool_pairs_timing.py's forced row form: the same window
        assert _row_window(replace(spec, keep_channels_last=False), 1, always=True) == window


def test_row_group_issues_several_window_rows_loads_together():
    """emit_pool(row_group=n): the row form's template takes n rows' loads at once (1, the
    default, keeps a row at a time; the kernel clamps n to KH and to 18 loads); fewer than one
    row is an error naming the option.  (tests/test_pool_gpu.py runs it against torch.)"""
    spec = _window("max", 2, 3, 1, 1)
    assert "constexpr int RG = 1 < KH ? (1 < RG_MAX ? 1 : RG_MAX)" in emit_pool(spec).cuda
    assert "constexpr int RG = 3 < KH ? (3 < RG_MAX ? 3 : RG_MAX)" in emit_pool(spec, row_group=3).cuda
    with pytest.raises(ValueError, match="row_group"):
        emit_pool(spec, row_group=0)


def test_kept_row_kernel_pools_a_strip_of_rows_on_request():
    """emit_pool(row_rows=R): the kept row kernel (cl4r) pools R output rows a thread (1 to 4,
    else an error naming the option); 1, the default, is the measured kernel; the NCHW-out row
    kernel (cl4rt) always pools one row.  (tests/test_pool_gpu.py runs R = 2 and 4 against torch;
    tests/pool_row_model.py models R = 1-4 against torch on the CPU.)"""
    from dataclasses import replace

    overlapping = replace(_window("max", 2, 3, 1, 1), keep_channels_last=True)
    assert "constexpr int R = 1;" in emit_pool(overlapping).cuda
    assert "constexpr int R = 2;" in emit_pool(overlapping, row_rows=2).cuda
    assert "constexpr int R = 4;" in emit_pool(replace(_window("max", 2, 2, 2), keep_channels_last=True),
                                               row_rows=4).cuda
    assert "_cl4_row<KIND, 1, V," in emit_pool(overlapping, row_rows=2).cuda  # cl4rt's call: one row
    for bad in (0, 5):
        with pytest.raises(ValueError, match="row_rows"):
            emit_pool(overlapping, row_rows=bad)


def test_plane_kernel_pools_a_strip_of_rows_on_request():
    """emit_pool(plane_rows=R): the contiguous-input plane kernel pools R output rows a thread
    on request; by default 4 (clamped as below) where a window's rows overlap the next output
    row's (a dilated height past the stride: the measured gain, bench/results/2026-12-07-h100-s38)
    and the pool has no epilogue operand, else 1; 1-D windows keep one row (one output row), and a strip whose input rows would pass
    the kernel's register budget takes fewer rows; out of 1-4 is an error naming the option.
    (tests/test_pool_gpu.py runs R = 2 and 4 against torch.)"""
    from kernelstitch.agents.coder.codegen.pool import _plane_fields, _plane_window

    level1_42 = _window("max", 2, 4, 1, 1)
    assert "constexpr int PR = 4," in emit_pool(level1_42).cuda  # overlapping rows: the strip
    assert "constexpr int PR = 1," in emit_pool(level1_42, plane_rows=1).cuda
    assert "constexpr int PR = 2," in emit_pool(_window("max", 2, 6, 1, 3)).cuda  # 4 rows clamped to 2
    for apart in (_window("avg", 2, 2, 2), _window("max", 2, 3, 3), _window("max", 2, 2, 3, dilation=2)):
        assert "constexpr int PR = 1," in emit_pool(apart).cuda  # rows that never overlap: 1
    assert "constexpr int PR = 3," in emit_pool(_window("max", 2, 2, 2, dilation=2)).cuda  # dilated: 3 rows high, 9 values a row
    assert "constexpr int PR = 1," in emit_pool(_window("max", 1, 4, 1, 1)).cuda  # 1-D
    from kernelstitch.agents.plan.kernel_spec import ElementwiseOp, TensorArg

    with_epilogue = replace(level1_42, inputs=(TensorArg("x", "float32"), TensorArg("e", "float32")),
                            epilogue=(ElementwiseOp("mul", ("acc", "e"), "o"),), epilogue_out="o",
                            epilogue_inputs=("e",))
    assert "constexpr int PR = 1," in emit_pool(with_epilogue).cuda  # an epilogue operand: 1 (spills, untimed)
    assert "constexpr int PR = 4," in emit_pool(with_epilogue, plane_rows=4).cuda
    assert "constexpr int PR = 2," in emit_pool(level1_42, plane_rows=2).cuda
    assert "constexpr int PR = 1," in emit_pool(_window("max", 1, 4, 1, 1), plane_rows=4).cuda  # 1-D
    window = _plane_window(level1_42, 1)  # 4 x 4, 7 values a row: 4 strip rows (7 input rows) fit 64
    assert _plane_fields(window, 4)["plane_rows"] == 4
    wide = _plane_window(_window("max", 2, 6, 1, 3), 1)  # 6 x 6: 9 values a row; 3 strip rows: 8 x 9 > 64
    assert _plane_fields(wide, 4)["plane_rows"] == 2
    for bad in (0, 5):
        with pytest.raises(ValueError, match="plane_rows"):
            emit_pool(level1_42, plane_rows=bad)


KIND_IDS = {"max": 0, "avg": 1}


def test_the_row_form_model_matches_torch():
    """A numpy model of the row kernels' thread mapping, per-column accumulation, 32-bit window
    bounds and the NCHW tile's runs (tests/pool_row_model.py) against torch's max_pool2d /
    avg_pool2d on random geometries: kernels 1-5, strides 1-4, padding, dilation, ceil mode,
    count_include_pad, divisor_override, widths not a multiple of 4, NaN in max windows."""
    pytest.importorskip("numpy")
    from pool_row_model import check

    assert check(150, seed=1) == 0


def test_the_plane_kernel_model_matches_torch():
    """A numpy model of the contiguous-input plane kernel (tests/pool_plane_model.py): its thread
    mapping, strips of 1-4 output rows (emit_pool(plane_rows=R), clamped as the emitter clamps),
    the warp-voted inside form and the masked form, against torch's max_pool2d / avg_pool2d on
    random 2-D geometries: kernels 1-5, strides 1-3, padding, dilation, ceil mode,
    count_include_pad, divisor_override, NaN in max windows, rows wide enough for whole warps
    inside the input."""
    pytest.importorskip("numpy")
    from pool_plane_model import check

    assert check(200, seed=1) == 0


def _smem1d_model(x, k: int, d: int, p: int, out_tile: int):
    """The shared-memory 1-D kernel's index math (cuda/pool/kernel.cu's smem1d) over rows `x` (a
    [rows, IW] float32 array, IW % 4 == 0): per tile of `out_tile` outputs, the span loaded from
    the 4-aligned start at or below o0 - p (positions outside the row as -inf), each output the
    max of its k taps at xs[shift + m + j * d]; NaN propagates as ks_max does."""
    import numpy as np

    rows, iw = x.shape
    ow = iw + 2 * p - (k - 1) * d  # stride 1
    span4 = (out_tile + (k - 1) * d + 3) // 4 * 4 + 4
    out = np.full((rows, ow), np.nan, dtype=np.float32)
    for o0 in range(0, ow, out_tile):
        first = o0 - p
        start = first & ~3  # (the kernel's: Python's & floors negatives as two's complement does)
        shift = first - start
        assert start % 4 == 0 and 0 <= shift <= 3
        pos = start + np.arange(span4)
        xs = np.full((rows, span4), -np.inf, dtype=np.float32)
        inside = (pos >= 0) & (pos < iw)
        xs[:, inside] = x[:, pos[inside]]
        m = np.arange(min(out_tile, ow - o0))
        taps = xs[:, shift + m[:, None] + d * np.arange(k)[None, :]]  # [rows, m, k]
        acc = taps.max(axis=2)
        acc[np.isnan(taps).any(axis=2)] = np.nan
        out[:, o0:o0 + len(m)] = acc
    return out


def test_the_shared_memory_1d_kernel_model_matches_torch():
    """emit_pool(plane_smem=True)'s index math (the 4-aligned span start, its shift, the taps in
    shared memory, the tile edges; small tiles so rows hold several) against torch's max_pool1d
    on random stride-1 windows and widths, NaN included; and the emitter gives the kernel only
    to stride-1 max windows the plane kernel takes with 16-byte loads (padding a multiple of 4),
    never by default.  (tests/test_pool_gpu.py runs the kernel.)"""
    np = pytest.importorskip("numpy")
    import torch

    rng = np.random.default_rng(5)
    for _ in range(60):
        k, d = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        p = int(rng.integers(0, k // 2 + 1))  # torch: at most half the kernel size
        iw = 4 * int(rng.integers(max(1, ((k - 1) * d + 1 - 2 * p + 3) // 4), 60))
        x = rng.standard_normal((3, iw)).astype(np.float32)
        x[rng.random(x.shape) < 0.01] = np.nan
        want = torch.nn.functional.max_pool1d(torch.from_numpy(x)[None], k, 1, p, d)[0].numpy()
        got = _smem1d_model(x, k, d, p, out_tile=int(rng.choice([8, 16, 64])))
        np.testing.assert_array_equal(got, want, err_msg=f"k={k} d={d} p={p} iw={iw}")
    # what the launcher sends: 4,096-output tiles, padding 0 or 4 (a multiple of 4: shift 0),
    # rows ending just before, at and after tile edges
    for k, d, p in [(8, 3, 4), (8, 1, 4), (3, 2, 0), (1, 1, 0)]:
        for ow in (4095, 4096, 4097, 8191, 8193):
            iw = ow - 2 * p + (k - 1) * d
            iw += (-iw) % 4  # (the kernel's rows are multiples of 4)
            x = rng.standard_normal((2, iw)).astype(np.float32)
            x[rng.random(x.shape) < 0.001] = np.nan
            want = torch.nn.functional.max_pool1d(torch.from_numpy(x)[None], k, 1, p, d)[0].numpy()
            np.testing.assert_array_equal(_smem1d_model(x, k, d, p, out_tile=4096), want, err_msg=f"k={k} p={p} iw={iw}")
    level1_41 = PoolSpec("l41", "max", _window("max", 1).inputs, 1, "float32", kernel=(8,), stride=(1,),
                         padding=(4,), dilation=(3,))
    assert "#if 1\nconstexpr int l41_smem1d_out" in emit_pool(level1_41, plane_smem=True).cuda
    assert "#if 0\nconstexpr int l41_smem1d_out" in emit_pool(level1_41).cuda  # off by default
    for other in (replace(level1_41, stride=(2,)), replace(level1_41, padding=(2,)), replace(level1_41, kind="avg", dilation=(1,)),
                  _window("max", 2, 3, 1, 1)):
        assert "#if 0\nconstexpr int" in emit_pool(replace(other, name="l41"), plane_smem=True).cuda, other


# ---------------------------------------------------------------- pool_params


def _node(op: str, *args, **kwargs) -> Node:
    return Node("p", op, (NodeRef("x"),) + args, kwargs)


def test_pool_params_follow_torch_defaults():
    p = pool_params(_node("aten.max_pool2d.default", [3]), 4)
    assert (p["kernel"], p["stride"], p["padding"], p["dilation"]) == ((3, 3), (3, 3), (0, 0), (1, 1))
    p = pool_params(_node("aten.avg_pool3d.default", [2, 2, 2], [], 1, True, False, 5), 5)
    assert p["stride"] == (2, 2, 2) and p["padding"] == (1, 1, 1) and p["ceil_mode"]
    assert not p["count_include_pad"] and p["divisor"] == 5
    p = pool_params(_node("aten.adaptive_avg_pool1d.default", [7]), 3)
    assert p == {"kind": "adaptive_avg", "nd": 1, "output_size": (7,)}
    assert "4-d" in pool_params(_node("aten.max_pool1d.default", [2]), 4)
    assert "static" in pool_params(_node("aten.max_pool2d.default", [NodeRef("k"), 2]), 4)


# ---------------------------------------------------------------- plans


def test_conv_bias_and_activations_fuse_into_the_max_pool(tmp_path):
    plan = _plan(tmp_path, CONV_MAX_POOL)
    assert [s.technique for s in plan.steps] == ["library_call", "fused_reduction"]
    (spec,) = _pool_steps(plan)
    assert spec.kind == "max" and spec.nd == 2 and spec.kernel == (2, 2) and spec.stride == (2, 2)
    assert [o.op for o in spec.prologue] == ["add", "sub", "hardswish"]  # conv bias, - 0.5, hardswish
    assert [o.op for o in spec.epilogue] == ["mish"]
    assert len(spec.plane_inputs) == 1 and spec.plane_inputs[0] != spec.inputs[0].name  # the bias view
    assert "max pooling" in plan.steps[1].description and "prologue" in plan.steps[1].description


def test_avg_pool3d_options_and_per_channel_epilogue(tmp_path):
    plan = _plan(tmp_path, CONV3D_AVG_POOL)
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    (spec,) = _pool_steps(plan)
    assert (spec.kind, spec.kernel, spec.stride, spec.padding) == ("avg", (3, 3, 3), (2, 2, 2), (1, 1, 1))
    assert spec.ceil_mode and not spec.count_include_pad
    assert [o.op for o in spec.prologue] == ["add", "mul"] and [o.op for o in spec.epilogue] == ["add"]
    assert len(spec.epilogue_inputs) == 1


def test_global_adaptive_avg_pool_becomes_a_mean_reduction(tmp_path):
    plan = _plan(tmp_path, ADAPTIVE)
    specs = [s.kernel_spec() for s in plan.steps]
    pools = [s for s in specs if isinstance(s, PoolSpec)]
    assert [(p.kind, p.output_size) for p in pools] == [("adaptive_avg", (5, 3))]
    assert [o.op for o in pools[0].prologue] == ["tanh"]
    means = [s for s in specs if getattr(s, "kind", "") == "mean"]
    assert len(means) == 1 and (means[0].dim, means[0].dim_count, means[0].keepdim) == (2, 2, True)
    assert [o.op for o in means[0].epilogue] == ["add"]


def test_pool1d_of_a_linear_and_unbatched_half_pooling_plan_without_fallback(tmp_path):
    for source in (LINEAR_POOL1D, HALF_UNBATCHED):
        plan = _plan(tmp_path, source)
        assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    (spec,) = _pool_steps(_plan(tmp_path, HALF_UNBATCHED))
    assert spec.inputs[0].dtype == "float16" and spec.out_dtype == "float16"


def test_max_pool_with_indices_stays_in_pytorch_with_a_reason(tmp_path):
    plan = _plan(tmp_path, WITH_INDICES)
    assert "pytorch_fallback" in [s.technique for s in plan.steps]
    assert any("max_pool2d_with_indices" in n for n in plan.notes)


def test_channels_last_conv_output_goes_to_the_pool_without_a_copy(tmp_path):
    path = write(tmp_path, CONV_MAX_POOL)
    plan = plan_builtin(capture(path))
    assert plan.steps[0].channels_last  # a 2-D conv runs NHWC
    candidate = code_builtin(plan, path, tmp_path / "model_new.py")
    forward = candidate.source[candidate.source.index("def _compute"):]
    assert "ks_layout_swap(v_x, True)" in forward  # the input to NHWC
    assert "# NHWC back to NCHW" not in forward  # the pool reads NHWC itself


def test_max_and_min_values_along_a_dim_are_amax_and_amin_reductions(tmp_path):
    plan = _plan(tmp_path, MIN_MAX_VALUES)
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    specs = [s.kernel_spec() for s in plan.steps]
    kinds = sorted((s.kind, s.dim, s.keepdim) for s in specs if getattr(s, "kind", "") in ("amax", "amin"))
    assert kinds == [("amax", 1, False), ("amin", -1, True)]
    amax = next(s for s in specs if getattr(s, "kind", "") == "amax")
    assert [o.op for o in amax.prologue] == ["relu", "mul"]


def test_max_along_a_dim_whose_indices_are_read_stays_in_pytorch(tmp_path):
    plan = _plan(tmp_path, MAX_WITH_INDICES_READ)
    assert any("aten.max.dim" in n for n in plan.notes)


def test_an_operand_shorter_than_the_spatial_dims_is_read_at_every_tap(tmp_path):
    """w of shape [W] varies along the last spatial dim: not a plane operand (read once per
    window, it would be w[0] for every window)."""
    source = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return F.avg_pool2d(x * self.w, 2)

def get_inputs():
    return [torch.randn(2, 3, 6, 8)]

def get_init_inputs():
    return []
'''
    (spec,) = _pool_steps(_plan(tmp_path, source))
    assert spec.plane_inputs == () and len(spec.inputs) == 2


def test_the_inside_finish_of_the_plane_kernel_is_the_default():
    """The plane kernel compiles the finish of windows inside the input (a constant divisor, no
    window bounds; timed faster on an H100, its GPU tests passed 2026-12-07); plane_inside=False
    leaves it out (the timing script's `vl` form)."""
    from kernelstitch.agents.plan.kernel_spec import TensorArg

    spec = PoolSpec("p44", "avg", (TensorArg("x", "float32"),), 1, "float32", kernel=(8,), stride=(1,),
                    padding=(4,), dilation=(1,))
    guard = "#if {}\n      // V windows inside the input"
    assert guard.format(1) in emit_pool(spec).cuda
    assert guard.format(0) in emit_pool(spec, plane_inside=False).cuda
    # taken by whole warps: a warp split between the forms ran both (level1/42, 2026-12-07)
    assert "if (__all_sync(__activemask(), ih0 >= 0" in emit_pool(spec).cuda
