"""Pooling on a GPU: the emitted kernels against torch's pooling over a grid of window options,
dtypes, odd shapes and both memory formats (one load_inline); the modules of tests/test_pool.py
generated and compared with their references at two shapes; KernelBench's pooling problems
generated and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import (  # noqa: E402
    ElementwiseOp,
    PoolSpec,
    TensorArg,
)
from kernelstitch.agents.coder.codegen.pool import (  # noqa: E402
    _plane_fields,
    _plane_window,
    _row_window,
    emit_pool,
)
from test_codegen import pool_specs  # noqa: E402
from test_codegen_gpu import load_kernels, poisoned  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402
from test_pool import CASES  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

F = torch.nn.functional
TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2)}

# (kind, nd, kernel, stride, padding, dilation, ceil_mode, count_include_pad, divisor, dtype)
GRID = [
    ("max", 1, 3, 2, 1, 2, False, True, 0, "float32"),
    ("max", 2, 2, 2, 0, 1, False, True, 0, "float32"),
    ("max", 2, 3, 2, 1, 1, True, True, 0, "float16"),
    ("max", 2, 3, 1, 1, 2, False, True, 0, "bfloat16"),
    ("max", 3, 2, 2, 0, 1, False, True, 0, "float32"),
    ("max", 3, 3, 2, 1, 1, True, True, 0, "float16"),
    ("avg", 1, 4, 3, 2, 1, True, False, 0, "float32"),
    ("avg", 2, 3, 2, 1, 1, True, True, 0, "float32"),
    ("avg", 2, 3, 2, 1, 1, True, False, 0, "float16"),
    ("avg", 2, 2, 2, 0, 1, False, True, 3, "float32"),
    ("avg", 3, 2, 2, 0, 1, False, True, 0, "bfloat16"),
    ("avg", 3, 3, 2, 1, 1, True, False, 0, "float32"),
    # level1/41's and 45's windows: a row of 8 dilated taps, and 11 x 11 (rows of 11 unrolled)
    ("max", 1, 8, 1, 4, 3, False, True, 0, "float32"),
    ("avg", 2, 11, 11, 0, 1, False, True, 0, "float32"),
    # level1/44's: 8 taps at stride 1 over rows padded by 4 (16-byte loads from column -4)
    ("avg", 1, 8, 1, 4, 1, False, True, 0, "float32"),
    # 64-tap 3-D windows, past the 4-channel kernels' unrolled bound (level2/72's 4x4x4 average;
    # a padded, dilated, ceil-mode max with clipped windows)
    ("avg", 3, 4, 4, 0, 1, False, True, 0, "float32"),
    ("max", 3, 4, 3, 1, 2, True, True, 0, "float32"),
]
ADAPTIVE = [(1, (7,), "float32"), (2, (5, 3), "float32"), (2, (4, 4), "float16"), (3, (2, 3, 4), "float32")]
SHAPES = {1: (3, 6, 29), 2: (2, 5, 17, 23), 3: (2, 4, 9, 11, 13)}


def _grid_spec(k: int, case) -> PoolSpec:
    kind, nd, kernel, stride, pad, dil, ceil, cip, div, dtype = case
    return PoolSpec(f"pool_grid{k}", kind, (TensorArg("x", dtype),), nd, dtype, kernel=(kernel,) * nd,
                    stride=(stride,) * nd, padding=(pad,) * nd, dilation=(dil,) * nd, ceil_mode=ceil,
                    count_include_pad=cip, divisor=div)


def _adaptive_spec(k: int, case) -> PoolSpec:
    nd, size, dtype = case
    return PoolSpec(f"pool_adaptive{k}", "adaptive_avg", (TensorArg("x", dtype),), nd, dtype, output_size=size)


def _reference(case, x):
    kind, nd, kernel, stride, pad, dil, ceil, cip, div, _ = case
    if kind == "max":
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
        return fn(x, kernel, stride, pad, dil, ceil_mode=ceil)
    if nd == 1:
        return F.avg_pool1d(x, kernel, stride, pad, ceil_mode=ceil, count_include_pad=cip)
    fn = F.avg_pool2d if nd == 2 else F.avg_pool3d
    return fn(x, kernel, stride, pad, ceil_mode=ceil, count_include_pad=cip, divisor_override=div or None)


# The row form of the channels-last 4-channel kernels (cl4r: NHWC out, cl4rt: NCHW out): fixed 2-D
# windows, (kind, kernel, stride, padding, dilation, ceil_mode, count_include_pad, divisor), each
# emitted twice (kept channels-last or not), with relu(x + b) as prologue (b a plane operand) and
# an epilogue operand e at the output index.
ROW_GRID = [
    ("max", (3, 3), (1, 1), (1, 1), (1, 1), False, True, 0),  # level3/6's
    ("max", (5, 5), (2, 2), (2, 2), (1, 1), True, True, 0),  # stride 2, 3 columns a thread, ceil mode
    ("max", (3, 2), (2, 1), (1, 1), (2, 1), True, True, 0),  # dilated rows at stride 2, 2-tap rows
    ("max", (2, 2), (2, 1), (0, 1), (1, 1), False, True, 0),
    ("max", (3, 3), (1, 1), (1, 1), (1, 1), True, True, 0),
    ("max", (2, 3), (1, 2), (1, 1), (1, 2), False, True, 0),  # dilated columns
    ("avg", (3, 3), (1, 1), (1, 1), (1, 1), False, False, 0),
    ("avg", (4, 4), (3, 2), (2, 2), (1, 1), True, False, 0),
    ("avg", (5, 5), (1, 1), (2, 2), (1, 1), False, True, 5),  # divisor_override
    ("avg", (3, 5), (1, 2), (1, 2), (1, 1), True, True, 0),
]
E = ElementwiseOp


def _row_spec(k: int, case, keep: bool, operands: bool) -> PoolSpec:
    kind, kernel, stride, pad, dil, ceil, cip, div = case
    x, b, e = (TensorArg(n, "float32") for n in ("x", "b", "e"))
    extra = dict(prologue=(E("add", ("x", "b"), "t1"), E("relu", ("t1",), "t2")), prologue_out="t2",
                 epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",),
                 plane_inputs=("b",)) if operands else {}
    return PoolSpec(f"pool_row{k}_{'cl' if keep else 'nchw'}{'_ops' if operands else ''}", kind,
                    (x, b, e) if operands else (x,), 2, "float32", kernel=kernel, stride=stride, padding=pad,
                    dilation=dil, ceil_mode=ceil, count_include_pad=cip, divisor=div, keep_channels_last=keep,
                    **extra)


def _row_specs() -> list[PoolSpec]:
    return [_row_spec(k, case, keep, ops) for k, case in enumerate(ROW_GRID) for keep in (True, False)
            for ops in (False, True)] + [_row_spec(len(ROW_GRID) + k, case, True, ops)
                                        for k, case in enumerate(KEPT_SMALL) for ops in (False, True)]


# 2x2 windows read each column once: the row form only for a pool kept channels-last (NHWC out)
KEPT_SMALL = [
    ("max", (2, 2), (2, 2), (0, 0), (1, 1), False, True, 0),  # RegNet's and VGG's
    ("avg", (2, 2), (2, 2), (0, 0), (1, 1), True, True, 0),
    ("max", (2, 2), (2, 2), (1, 1), (1, 1), True, True, 0),
]


def _operand_kernel(k: int, case, keep: bool, name: str, **keywords):
    """_row_spec's window `case` with operands, named `name`, emitted with emit_pool's `keywords`
    (the forms beside the default the tests below run)."""
    from dataclasses import replace

    return emit_pool(replace(_row_spec(k, case, keep, True), name=name), **keywords)


def _row_group_kernels() -> list:
    """ROW_GRID's windows with operands, every window row's loads issued together (row_group=KH,
    clamped by the kernel to 18 loads), kept and not: pool_row{k}_{cl,nchw}_rg."""
    return [_operand_kernel(k, case, keep, f"pool_row{k}_{'cl' if keep else 'nchw'}_rg", row_group=case[1][0])
            for k, case in enumerate(ROW_GRID) for keep in (True, False)]


# strip heights of the kept row kernel (cl4r) beside the default 1 (emit_pool(row_rows=R))
STRIP_ROWS = (2, 4)


def _strip_kernels() -> list:
    """ROW_GRID's windows with operands, kept channels-last, each thread pooling R output rows
    (emit_pool(row_rows=R)): pool_row{k}_cl_s{R}."""
    return [_operand_kernel(k, case, True, f"pool_row{k}_cl_s{rows}", row_rows=rows)
            for k, case in enumerate(ROW_GRID) for rows in STRIP_ROWS]


# The plane kernel's strip form (emit_pool(plane_rows=R)) over contiguous inputs: ROW_GRID's
# windows and three more, unpadded ones (16-byte loads on aligned rows) and level1/42's 4x4.
PLANE_STRIP = ROW_GRID + [
    ("max", (3, 3), (1, 1), (0, 0), (1, 1), False, True, 0),
    ("avg", (3, 3), (1, 1), (0, 0), (1, 1), True, False, 0),
    ("max", (4, 4), (1, 1), (1, 1), (1, 1), False, True, 0),  # level1/42's
    ("max", (4, 2), (3, 1), (1, 0), (1, 1), False, True, 0),  # stride 3 within the register budget
]
# (N, C, H, W): >= 512 outputs a plane (the plane kernel's bound); a width of a multiple of 4
# (16-byte rows), an odd one, output heights odd and even; and rows of 520, whose 130 column
# groups a row put whole warps inside the input (the warp-voted inside form: narrower rows put a
# row's first or last group in every warp)
PLANE_STRIP_SHAPES = [(2, 3, 61, 84), (1, 2, 50, 77), (1, 1, 52, 64), (1, 2, 37, 520)]
PLANE_STRIP_ROWS = (2, 4)


def _plane_strip_kernels() -> list:
    """PLANE_STRIP's windows with operands over contiguous inputs, the plane kernel pooling R
    output rows a thread: pool_plane{k}_s{R}."""
    return [_operand_kernel(k, case, False, f"pool_plane{k}_s{rows}", plane_rows=rows)
            for k, case in enumerate(PLANE_STRIP) for rows in PLANE_STRIP_ROWS]


@pytest.fixture(scope="module")
def ext():
    specs = ([_grid_spec(k, c) for k, c in enumerate(GRID)] + [_adaptive_spec(k, c) for k, c in enumerate(ADAPTIVE)]
             + pool_specs() + _row_specs() + _row_group_kernels() + _strip_kernels() + _plane_strip_kernels())
    return load_kernels("ks_pool_gpu_tests", specs)


def _layouts(x: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    out = [("contiguous", x)]
    if x.dim() == 4:
        out.append(("channels_last", x.contiguous(memory_format=torch.channels_last)))
    if x.dim() == 5:
        out.append(("channels_last_3d", x.contiguous(memory_format=torch.channels_last_3d)))
    out.append(("unbatched" if x.dim() > 3 else "strided", x[0] if x.dim() > 3 else x[:, :, ::2]))
    return out


def _check(got: torch.Tensor, want: torch.Tensor, label: str, contiguous: bool = True) -> None:
    assert got.shape == want.shape, (label, got.shape, want.shape)
    assert got.is_contiguous() or not contiguous, label  # whatever the input's layout
    rtol, atol = TOL[want.dtype]
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True,
                               msg=lambda m: f"{label}: {m}")


@pytest.mark.parametrize("k", range(len(GRID)))
def test_pooling_matches_torch_over_layouts(ext, k):
    case = GRID[k]
    torch.manual_seed(k)
    x = torch.randn(*SHAPES[case[1]], device="cuda", dtype=TORCH_DT[case[-1]])
    if case[0] == "max":
        x.view(-1)[::97] = float("nan")  # NaN propagates through a max window
    for label, view in _layouts(x):
        _check(getattr(ext, f"pool_grid{k}")(view), _reference(case, view), f"{case} {label}")


@pytest.mark.parametrize("k", range(len(ADAPTIVE)))
def test_adaptive_pooling_matches_torch(ext, k):
    nd, size, dtype = ADAPTIVE[k]
    x = torch.randn(*SHAPES[nd], device="cuda", dtype=TORCH_DT[dtype])
    fn = (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)[nd - 1]
    for label, view in _layouts(x):
        _check(getattr(ext, f"pool_adaptive{k}")(view), fn(view, size), f"{ADAPTIVE[k]} {label}")


@pytest.mark.parametrize("k", [k for k, case in enumerate(GRID) if case[-1] == "float32" and case[1] >= 2]
                         + [len(GRID) + k for k, case in enumerate(ADAPTIVE) if case[-1] == "float32" and case[0] >= 2])
def test_the_four_channel_path_matches_torch(ext, k):
    """Channels-last float32 inputs with C % 4 == 0 run the 4-channel kernel (16-byte loads, the
    window's taps unrolled and masked): every window option of GRID and adaptive windows, and a
    misaligned view (the one-channel kernel), against torch."""
    grid = k < len(GRID)
    case = GRID[k] if grid else ADAPTIVE[k - len(GRID)]
    nd = case[1] if grid else case[0]
    shape = {2: (3, 8, 17, 23), 3: (2, 12, 9, 11, 13)}[nd]
    torch.manual_seed(k)
    x = torch.randn(*shape, device="cuda")
    if grid and case[0] == "max":
        x.view(-1)[::97] = float("nan")
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    fn = getattr(ext, f"pool_grid{k}" if grid else f"pool_adaptive{k - len(GRID)}")
    adaptive = (F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)[nd - 2]

    def want(v):
        return _reference(case, v) if grid else adaptive(v, case[1])

    cl = x.contiguous(memory_format=fmt)
    _check(fn(cl), want(cl), f"{case} channels-last, 4 channels a thread")
    storage = torch.empty(x.numel() + 1, device="cuda")
    shifted = storage[1:].as_strided(cl.shape, cl.stride())  # 4-byte offset: not 16-byte aligned
    shifted.copy_(cl)
    _check(fn(shifted), want(cl), f"{case} channels-last, misaligned")


def test_prologue_plane_and_epilogue_operands(ext):
    """pool_specs()[0]: relu((x + b) * y) max-pooled (ceil mode, padded, dilated in h), + e."""
    x = torch.randn(2, 3, 7, 10, 9, device="cuda")
    b = torch.randn(3, 1, 1, 1, device="cuda")
    y = torch.randn(7, 10, 9, device="cuda")
    want = F.max_pool3d(torch.relu((x + b) * y), (2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 2, 1), ceil_mode=True)
    e = torch.randn(want.shape[-1], device="cuda")
    for label, view in _layouts(x)[:2]:
        got = ext.pool_max3d(view, b, y, e)
        _check(got, want + e, label)


@pytest.mark.parametrize("shape", [(2, 64, 17, 18), (3, 5, 9, 9), (1, 128, 56, 56)])
def test_a_pooling_kept_channels_last_stores_channels_last(ext, shape):
    """keep_channels_last: a channels-last input's pooled output is stored in the same memory
    order (channels-last), a contiguous input's contiguously; values as torch's."""
    x = torch.randn(*shape, device="cuda")
    b = torch.randn(shape[1], 1, 1, device="cuda")
    want = F.max_pool2d(torch.relu(x + b), 3, 2, 1)
    got = ext.pool_max2d_cl(x.contiguous(memory_format=torch.channels_last), b)
    assert got.is_contiguous(memory_format=torch.channels_last) and not got.is_contiguous()
    _check(got, want, "channels-last kept", contiguous=False)
    got = ext.pool_max2d_cl(x, b)
    assert got.is_contiguous()
    _check(got, want, "contiguous")


@pytest.mark.parametrize("keep", [True, False])
def test_plane_operands_of_every_layout_in_the_four_channel_kernels(ext, keep):
    """The 4-channel kernels read a per-channel prologue operand of their 4 channels as one 16-byte
    load (ks_ld_planes4); a misaligned one 4 loads, per-(sample, channel) values [N, C, 1, 1] 4
    consecutive values too, a strided view an offset a channel: each against torch, with a
    channels-last output (pool_max2d_cl: relu(x + b), 3x3 / stride 2, the cl4 kernel) and a
    contiguous one (pool_avg2d_to_nchw: tanh(x + b), 2x2, times e: the tiled cl4t kernel), and
    through the row form (level3/6's window: cl4r / cl4rt); the kernel that ran is checked."""
    torch.manual_seed(3)
    N, C = 3, 20
    x = torch.randn(N, C, 19, 22, device="cuda").contiguous(memory_format=torch.channels_last)
    storage = torch.randn(2 * N * C + 1, device="cuda")
    operands = {
        "per channel": torch.randn(C, 1, 1, device="cuda"),
        "misaligned": storage[1:C + 1].view(C, 1, 1),
        "per (sample, channel)": torch.randn(N, C, 1, 1, device="cuda"),
        "strided": storage[: 2 * C : 2].view(C, 1, 1),
    }
    row = getattr(ext, f"pool_row0_{'cl' if keep else 'nchw'}_ops")  # level3/6's 3x3 / stride 1: the row form
    for label, b in operands.items():
        if keep:
            got = ext.pool_max2d_cl(x, b)
            assert got.is_contiguous(memory_format=torch.channels_last)
            _check(got, F.max_pool2d(torch.relu(x + b), 3, 2, 1), f"{label} operand, channels-last out",
                   contiguous=False)
            assert any("_cl4_kernel<" in n for n in _kernel_names(ext.pool_max2d_cl, x, b)), label
        else:
            e = torch.randn(C, 9, 11, device="cuda")
            _check(ext.pool_avg2d_to_nchw(x, b, e), F.avg_pool2d(torch.tanh(x + b), 2, 2) * e,
                   f"{label} operand, contiguous out")
            assert any("_cl4t_kernel<" in n for n in _kernel_names(ext.pool_avg2d_to_nchw, x, b, e)), label
        e_row = torch.randn(C, 19, 22, device="cuda")  # the 3x3 / stride-1 / padding-1 window keeps 19 x 22
        _check(row(x, b, e_row), _row_reference(ROW_GRID[0], x, b, e_row), f"{label} operand, row form",
               contiguous=not keep)
        assert any(("_cl4r_kernel<" if keep else "_cl4rt_kernel<") in n for n in _kernel_names(row, x, b, e_row)), label


@pytest.mark.parametrize("shape", [(2, 8, 37, 41), (3, 132, 19, 18), (1, 64, 130, 66), (2, 12, 3, 5), (2, 4, 70, 66)])
def test_channels_last_input_pooled_into_a_contiguous_output(ext, shape):
    """The tiled 4-channel kernel: 32-position x 128-channel tiles staged in shared memory (more
    positions below 64 channels: 4 channels' 512-position tiles, several a sample), so partial
    position tiles (S not a multiple of the tile's), a partial channel tile (132 channels: a
    second tile of one group), a plane operand in the prologue and an epilogue operand read at
    the contiguous output index; the misaligned view takes the one-channel kernel."""
    torch.manual_seed(shape[1])
    x = torch.randn(*shape, device="cuda")
    b = torch.randn(shape[1], 1, 1, device="cuda")
    want = F.avg_pool2d(torch.tanh(x + b), 2, 2)
    e = torch.randn(want.shape[1:], device="cuda")
    want = want * e
    cl = x.contiguous(memory_format=torch.channels_last)
    _check(ext.pool_avg2d_to_nchw(cl, b, e), want, "channels-last in, contiguous out")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        ext.pool_avg2d_to_nchw(cl, b, e)
        torch.cuda.synchronize()
    assert any("_cl4t_kernel<" in k.key for k in prof.key_averages())  # (named after an equal spec's kernel)
    storage = torch.empty(x.numel() + 1, device="cuda")
    shifted = storage[1:].as_strided(cl.shape, cl.stride())
    shifted.copy_(cl)
    _check(ext.pool_avg2d_to_nchw(shifted, b, e), want, "misaligned")


def _kernel_names(fn, *args) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return {k.key for k in prof.key_averages()}


def _plane_shape(case, aligned: bool) -> tuple[int, ...]:
    """A contiguous input with at least 512 outputs a plane (the plane kernel's lower bound):
    rows of a width that is (aligned) or is not a multiple of 4."""
    _, nd, kernel, stride, pad, dil, *_ = case
    span = (kernel - 1) * dil + 1 - 2 * pad
    width = (900 if nd == 1 else 40) * stride + span + (8 if aligned else 7)
    width += (-width) % 4 if aligned else (width % 4 == 0)
    return (2, 3, width) if nd == 1 else (2, 3, 24 * stride + span + 3, width)


def _shifted(x: torch.Tensor) -> torch.Tensor:
    """x's values in a contiguous tensor 4 bytes past a 16-byte boundary."""
    storage = torch.empty(x.numel() + 1, device=x.device, dtype=x.dtype)
    out = storage[1:].view(x.shape)
    out.copy_(x)
    return out


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("k", [k for k, case in enumerate(GRID) if case[-1] == "float32" and case[1] <= 2])
def test_contiguous_planes_take_the_plane_kernel(ext, k, aligned):
    """Contiguous float32 inputs of 1-D / 2-D windows with >= 512 outputs a plane run the plane
    kernel (4 outputs a thread, each window row's span loaded once; 16-byte loads where the rows
    are aligned and padded by a multiple of 4): every window option of GRID (padding, dilation, ceil mode,
    count_include_pad, divisor, rows of 11) against torch, NaN through max windows; the tail of
    a row (outputs not a multiple of 4), and a small plane takes the one-value kernel."""
    case = GRID[k]
    torch.manual_seed(k)
    x = torch.randn(*_plane_shape(case, aligned), device="cuda")
    if case[0] == "max":
        x.view(-1)[::97] = float("nan")
    fn = getattr(ext, f"pool_grid{k}")
    want = _reference(case, x)
    assert want[0, 0].numel() >= 512
    _check(fn(x), want, f"{case} {tuple(x.shape)}")
    fits = _plane_window(_grid_spec(k, case), 1) is not None  # else (rows of 11): the one-value kernel
    names = _kernel_names(fn, x)
    assert fits == any(f"pool_grid{k}_plane_kernel<" in name for name in names)
    if fits and aligned and case[4] % 4 == 0:  # rows of a width % 4 == 0, padding % 4 == 0: 16-byte loads
        assert any(f"pool_grid{k}_plane_kernel<{int(case[0] == 'avg')}, true>" in name for name in names)
    # a view whose rows are longer than its width, an unbatched input, and a misaligned copy
    # (no 16-byte loads) take the plane kernel too
    for label, view, vl in [("row view", x[..., :-4], aligned), ("unbatched", x[0], aligned),
                            ("misaligned", _shifted(x), False)]:
        _check(fn(view), _reference(case, view), f"{case} {label}")
        names = _kernel_names(fn, view)
        assert fits == any(f"pool_grid{k}_plane_kernel<" in name for name in names), label
        if fits and case[4] % 4 == 0:
            assert vl == any(f"pool_grid{k}_plane_kernel<{int(case[0] == 'avg')}, true>" in n for n in names), label
    span = (case[2] - 1) * case[5] + 1 + 2  # a few windows a row: a plane of < 512 outputs
    small = (x[..., :span] if case[1] == 1 else x[:, :, :span, :span]).contiguous()
    _check(fn(small), _reference(case, small), f"{case} {tuple(small.shape)}")
    assert not any("_plane_kernel<" in name for name in _kernel_names(fn, small))


@pytest.mark.parametrize("rows", PLANE_STRIP_ROWS)
def test_plane_strip_rows_pool_every_output_row_with_the_same_values(ext, rows):
    """emit_pool(plane_rows=R): the contiguous-input plane kernel pooling R output rows a thread
    (each input row of the strip loaded and prologued once for every output row holding it;
    output heights not a multiple of R, padding and dilated rows, strides up to 3, 16-byte and
    4-byte rows, the inside form and the masked one) gives torch's values for every PLANE_STRIP
    window, with a plane operand in the prologue and an epilogue operand, NaN through max windows.
    (ROW_GRID's 5x5 / stride 2 and 4x4 / stride 3 pass the kernel's register budget at 2 rows and
    run one; the others run the strip, at 3 rows where 4 would pass it.)"""
    strips = [_plane_fields(_plane_window(_row_spec(k, c, False, True), 1), rows)["plane_rows"]
              for k, c in enumerate(PLANE_STRIP)]
    assert sum(r > 1 for r in strips) == len(PLANE_STRIP) - 2, strips
    for k, case in enumerate(PLANE_STRIP):
        fn = getattr(ext, f"pool_plane{k}_s{rows}")
        for shape in PLANE_STRIP_SHAPES:
            inputs = _row_case_inputs(case, shape, seed=k * 19 + shape[-1] + rows)
            if inputs is None:
                continue
            x, _, want, b, e = inputs
            label = f"{case} {shape} plane_rows={rows}"
            assert want[0, 0].numel() >= 512, label
            _check(fn(x, b, e), _row_reference(case, x, b, e), label)
            assert any("_plane_kernel<" in n for n in _kernel_names(fn, x, b, e)), label


@pytest.mark.parametrize("shape", [(2, 5, 64, 64), (1, 3, 75, 93)])
def test_plane_kernel_with_plane_and_epilogue_operands(ext, shape):
    """A contiguous input through the plane kernel with a per-channel operand in the prologue
    (read once a plane) and an epilogue operand at the output index (level3/13's batch_norm +
    ReLU + average pool has four plane operands)."""
    torch.manual_seed(shape[-1])
    x = torch.randn(*shape, device="cuda")
    b = torch.randn(shape[1], 1, 1, device="cuda")
    want = F.avg_pool2d(torch.tanh(x + b), 2, 2)
    e = torch.randn(want.shape[1:], device="cuda")
    _check(ext.pool_avg2d_to_nchw(x, b, e), want * e, "contiguous in, plane kernel")
    assert any("pool_avg2d_to_nchw_plane_kernel<" in k for k in _kernel_names(ext.pool_avg2d_to_nchw, x, b, e))
    _check(ext.pool_max2d_cl(x, b), F.max_pool2d(torch.relu(x + b), 3, 2, 1), "max, padded")


def test_bad_windows_raise_clear_errors(ext):
    with pytest.raises(RuntimeError, match="output size"):
        ext.pool_grid4(torch.randn(1, 1, 1, 1, 1, device="cuda"))  # 2x2x2 window over 1x1x1
    with pytest.raises(RuntimeError, match="expected a 4-d or 5-d input"):
        ext.pool_grid4(torch.randn(4, 4, device="cuda"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_matches_its_reference_at_two_shapes(name, tmp_path):
    module_matches_reference(*CASES[name], tmp_path)


@pytest.mark.parametrize("problem", [
    "level2/35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py", "level2/50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling.py",
    "level2/6_Conv3d_Softmax_MaxPool_MaxPool.py", "level2/67_Conv2d_GELU_GlobalAvgPool.py",
    "level2/98_Matmul_AvgPool_GELU_Scale_Max.py", "level2/32_Conv2d_Scaling_Min.py",
    "level3/13_DenseNet121TransitionLayer.py",
    # a pool of a pool planned as one pool of the composed window (rewrites._stacked_pools)
    "level2/72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool.py", "level2/78_ConvTranspose3d_Max_Max_Sum.py"])
def test_kernelbench_problem_generates_and_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)


@pytest.mark.parametrize("bias, pool", [
    (True, "nn.AvgPool2d(kernel_size=2, stride=2)"),
    (False, "nn.AvgPool2d(kernel_size=3, stride=2, padding=1)"),
    (True, "nn.AdaptiveAvgPool2d((3, 2))"),
])
def test_pool_before_pointwise_conv_matches_the_module(bias, pool, tmp_path):
    """rewrites._pool_before_pointwise_conv on the GPU: the pooled BN + ReLU, then cuDNN's 1x1 conv."""
    from test_pool_conv_commute import _source

    module_matches_reference(_source(bias=bias, pool=pool), {}, tmp_path)


def _row_reference(case, x, b=None, e=None):
    kind, kernel, stride, pad, dil, ceil, cip, div = case
    if b is not None:
        x = torch.relu(x + b)
    if kind == "max":
        out = F.max_pool2d(x, kernel, stride, pad, dil, ceil_mode=ceil)
    else:
        out = F.avg_pool2d(x, kernel, stride, pad, ceil_mode=ceil, count_include_pad=cip, divisor_override=div or None)
    return out if e is None else out * e


# (N, C, H, W): widths whose output widths are not multiples of 4, 4 channels (one lane a
# position), 136 channels (a partial 128-channel tile), a row of one output
ROW_SHAPES = [(2, 12, 17, 23), (1, 4, 9, 31), (2, 136, 11, 14), (3, 8, 5, 5), (1, 16, 30, 30)]


def _row_case_inputs(case, shape, seed: int):
    """A row-form case's input x (NaN at every 97th value for a max window), its channels-last
    copy, torch's pooling of x, a per-channel operand b and an output-sized operand e; None where
    the window does not fit the shape."""
    torch.manual_seed(seed)
    x = torch.randn(*shape, device="cuda")
    if case[0] == "max":
        x.view(-1)[::97] = float("nan")
    try:
        want = _row_reference(case, x)
    except RuntimeError:  # a window too large for this shape
        return None
    b = torch.randn(shape[1], 1, 1, device="cuda")
    e = torch.randn(want.shape[1:], device="cuda")
    return x, x.contiguous(memory_format=torch.channels_last), want, b, e


@pytest.mark.parametrize("keep", [True, False])
def test_row_group_issues_rows_together_with_the_same_values(ext, keep):
    """emit_pool(row_group=KH): the row form issuing all of a window's rows' loads together
    (padding rows masked, rows past KH not loaded) gives torch's values for every ROW_GRID window,
    with a plane operand in the prologue and an epilogue operand, NaN through max windows."""
    for k, case in enumerate(ROW_GRID):
        fn = getattr(ext, f"pool_row{k}_{'cl' if keep else 'nchw'}_rg")
        for shape in ROW_SHAPES:
            inputs = _row_case_inputs(case, shape, seed=k * 13 + shape[1])
            if inputs is None:
                continue
            x, cl, _, b, e = inputs
            _check(fn(cl, b, e), _row_reference(case, x, b, e), f"{case} {shape} row_group={case[1][0]}",
                   contiguous=not keep)


@pytest.mark.parametrize("rows", STRIP_ROWS)
def test_strip_rows_pool_every_output_row_with_the_same_values(ext, rows):
    """emit_pool(row_rows=R): the kept row kernel pooling R output rows a thread (each input row
    of the strip loaded once for every output row holding it; output heights not a multiple of R,
    padding rows, dilated rows, strides up to 3) gives torch's values for every ROW_GRID window,
    with a plane operand in the prologue and an epilogue operand, NaN through max windows."""
    for k, case in enumerate(ROW_GRID):
        fn = getattr(ext, f"pool_row{k}_cl_s{rows}")
        for shape in ROW_SHAPES:
            inputs = _row_case_inputs(case, shape, seed=k * 17 + shape[1] + rows)
            if inputs is None:
                continue
            x, cl, _, b, e = inputs
            got = fn(cl, b, e)
            assert got.is_contiguous(memory_format=torch.channels_last), (case, shape)
            _check(got, _row_reference(case, x, b, e), f"{case} {shape} row_rows={rows}", contiguous=False)
            assert any("_cl4r_kernel<" in n for n in _kernel_names(fn, cl, b, e)), (case, shape)


@pytest.mark.parametrize("k, keep", [(k, keep) for k in range(len(ROW_GRID)) for keep in (True, False)]
                         + [(len(ROW_GRID) + k, True) for k in range(len(KEPT_SMALL))])
def test_the_row_kernels_match_torch(ext, k, keep):
    """Channels-last float32 inputs of fixed 2-D windows run the row form (V columns x 4 channels a
    thread, each window row's columns loaded once): padding, dilation, ceil mode, count_include_pad,
    divisor_override, output widths not a multiple of V, NaN through max windows, NHWC (kept
    channels-last: cl4r) and NCHW (cl4rt) outputs, with and without a plane operand in the
    prologue and an epilogue operand; the kernel that ran is the row kernel.  KEPT_SMALL's 2x2
    windows (their rows read each column once) take it only kept channels-last."""
    case = (ROW_GRID + KEPT_SMALL)[k]
    assert _row_window(_row_spec(k, case, keep, False), 1) is not None
    kernel = "_cl4r_kernel<" if keep else "_cl4rt_kernel<"
    for shape in ROW_SHAPES:
        inputs = _row_case_inputs(case, shape, seed=k * 31 + shape[1])
        if inputs is None:
            continue
        x, cl, want, b, e = inputs
        label = f"{case} {shape} {'NHWC' if keep else 'NCHW'} out"
        plain = getattr(ext, f"pool_row{k}_{'cl' if keep else 'nchw'}")
        ops = getattr(ext, f"pool_row{k}_{'cl' if keep else 'nchw'}_ops")
        got = plain(cl)
        assert got.is_contiguous(memory_format=torch.channels_last) or not keep, label
        _check(got, want, label, contiguous=not keep)
        _check(ops(cl, b, e), _row_reference(case, x, b, e), label + ", prologue + epilogue operands",
               contiguous=not keep)
        # (kernels whose CUDA text equals another spec's but for the name are compiled once, under
        # one spec's name: the kernel is known by its family)
        assert any(kernel in n for n in _kernel_names(plain, cl)), label
        assert any(kernel in n for n in _kernel_names(ops, cl, b, e)), label
        # a misaligned view keeps the one-channel kernel, a contiguous input never takes the row form
        storage = torch.empty(x.numel() + 1, device="cuda")
        shifted = storage[1:].as_strided(cl.shape, cl.stride())
        shifted.copy_(cl)
        _check(plain(shifted), want, label + ", misaligned", contiguous=not keep)
        assert not any("_cl4r" in n for n in _kernel_names(plain, shifted)), label
        assert not any("_cl4r" in n for n in _kernel_names(plain, x)), label


def test_windows_outside_the_row_form_keep_the_cl4_kernels(ext):
    """3-D windows, adaptive windows, 2-D windows past 27 taps (11 x 11) and windows whose rows
    read each column fewer than twice (2 x 2 / stride 2, 3 x 3 / stride 2: the cl4 kernels measured
    faster there) run the one-position cl4 kernels on channels-last float32 inputs, into a
    contiguous output (kept channels-last, a 2 x 2 window takes the row form: KEPT_SMALL)."""
    x = torch.randn(2, 8, 25, 27, device="cuda").contiguous(memory_format=torch.channels_last)
    for k in (1, 7):  # GRID's 2 x 2 / stride 2 max and 3 x 3 / stride 2 average
        assert GRID[k][1:4] in ((2, 2, 2), (2, 3, 2)) and GRID[k][-1] == "float32"
        fn = getattr(ext, f"pool_grid{k}")
        _check(fn(x), _reference(GRID[k], x), f"{GRID[k]} channels-last")
        names = _kernel_names(fn, x)
        assert any("_cl4t_kernel<" in n for n in names) and not any("_cl4r" in n for n in names), GRID[k]
    k11 = next(k for k, c in enumerate(GRID) if c[2] == 11)
    names = _kernel_names(getattr(ext, f"pool_grid{k11}"), x)
    assert any("_cl4t_kernel<" in n for n in names) and not any("_cl4r" in n for n in names)
    names = _kernel_names(ext.pool_adaptive1, x)
    assert any("_cl4t_kernel<" in n for n in names) and not any("_cl4r" in n for n in names)
    x3 = torch.randn(2, 12, 9, 11, 13, device="cuda").contiguous(memory_format=torch.channels_last_3d)
    names = _kernel_names(ext.pool_grid4, x3)
    assert any("_cl4t_kernel<" in n for n in names) and not any("_cl4r" in n for n in names)


# The shared-memory 1-D kernel (emit_pool(plane_smem=True), off by default): stride-1 max windows
# the plane kernel takes with 16-byte loads (padding 0 or 4), level1/41's among them, one with a
# plane operand in the prologue and an epilogue operand.  (kernel, dilation, padding, operands)
SMEM1D = [(8, 3, 4, False), (8, 1, 4, False), (3, 2, 0, False), (1, 1, 0, False), (5, 2, 0, True), (8, 2, 4, True)]


def _smem1d_spec(k: int, case) -> PoolSpec:
    kernel, dilation, padding, operands = case
    x, b, e = (TensorArg(n, "float32") for n in ("x", "b", "e"))
    extra = dict(prologue=(E("add", ("x", "b"), "t1"), E("relu", ("t1",), "t2")), prologue_out="t2",
                 epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",),
                 plane_inputs=("b",)) if operands else {}
    return PoolSpec(f"pool_smem1d{k}", "max", (x, b, e) if operands else (x,), 1, "float32", kernel=(kernel,),
                    stride=(1,), padding=(padding,), dilation=(dilation,), **extra)


@pytest.fixture(scope="module")
def smem_ext():
    return load_kernels("ks_pool_smem1d_gpu_tests",
                        [emit_pool(_smem1d_spec(k, c), plane_smem=True) for k, c in enumerate(SMEM1D)])


@pytest.mark.parametrize("k", range(len(SMEM1D)))
def test_the_shared_memory_1d_kernel_matches_torch(smem_ext, k):
    """Every SMEM1D window over rows of one tile and of several (4,096 outputs a tile, the last one
    partial), NaN through the windows, gives torch's values and runs the smem1d kernel; a
    misaligned copy (no 16-byte loads) runs the plane kernel instead, with the same values."""
    kernel, dilation, padding, operands = SMEM1D[k]
    fn = getattr(smem_ext, f"pool_smem1d{k}")
    for shape in [(2, 3, 1024), (1, 2, 9000), (3, 1, 4096 + 2 * padding)]:
        torch.manual_seed(k * 7 + shape[-1])
        x = torch.randn(*shape, device="cuda")
        x.view(-1)[::97] = float("nan")
        b = torch.randn(shape[1], 1, device="cuda")
        want = F.max_pool1d(torch.relu(x + b) if operands else x, kernel, 1, padding, dilation)
        e = torch.randn(want.shape[1:], device="cuda")
        args = (x, b, e) if operands else (x,)
        want = want * e if operands else want
        label = f"{SMEM1D[k]} {shape}"
        _check(poisoned(fn, *args), want, label)  # (a skipped output stays NaN where torch's is not)
        assert any(f"pool_smem1d{k}_smem1d_kernel<" in n for n in _kernel_names(fn, *args)), label
        moved = _shifted(x)
        moved_args = (moved, b, e) if operands else (moved,)
        _check(fn(*moved_args), want, f"{label} misaligned")
        names = _kernel_names(fn, *moved_args)
        assert not any("_smem1d_kernel<" in n for n in names) and any("_plane_kernel<" in n for n in names), label
