"""The example problem suite: every file scans and loads, and its shapes, ops and sizes are what
the suite promises. Problems are built on the meta device, so full H100-sized shapes cost no CPU
memory or compute; a second pass shrinks the UPPERCASE shape constants and runs on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from kernelstitch.core.problem import ProblemError, load_problem, resolve_module, scan_source

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
USER_STYLE = EXAMPLES / "user_style"

MB = 1 << 20
MIN_MEMORY_BOUND_BYTES = 256 * MB  # below this, launch overhead would blur timings
MAX_BYTES = 3 << 30  # inputs + outputs + weights must fit comfortably on one GPU
# H100 fp32 ridge point is ~20 FLOP/byte; use a margin on both sides of it.
COMPUTE_BOUND_INTENSITY = 50.0

# file -> (category, bound, aten ops forward must call, expected output shape from constants).
# Keyed by file name so a new example must be registered here (test_table_matches_files).
SUITE = {
    "elementwise_chain.py": (
        "elementwise",
        "memory",
        {"mul", "add", "relu", "clamp"},
        lambda ns: (ns.BATCH, ns.DIM),
    ),
    "linear_bias_gelu.py": (
        "gemm_epilogue",
        "compute",
        {"addmm", "gelu"},
        lambda ns: (ns.BATCH, ns.OUT_FEATURES),
    ),
    "matmul_scale_residual.py": (
        "gemm_epilogue",
        "compute",
        {"mm", "mul", "add"},
        lambda ns: (ns.M, ns.N),
    ),
    "conv2d_bias_relu.py": (
        "conv_epilogue",
        "compute",
        {"convolution", "relu", "mul", "add"},
        lambda ns: (ns.BATCH, ns.OUT_CHANNELS, ns.HEIGHT, ns.WIDTH),
    ),
    "softmax_temperature.py": (
        "softmax",
        "memory",
        {"div", "_softmax"},
        lambda ns: (ns.ROWS, ns.COLS),
    ),
    "layernorm_residual.py": (
        "layernorm",
        "memory",
        {"add", "native_layer_norm"},
        lambda ns: (ns.TOKENS, ns.HIDDEN),
    ),
    "reduce_sum.py": ("reduce_sum", "memory", {"sum"}, lambda ns: (ns.ROWS,)),
    "reduce_mean.py": ("reduce_mean", "memory", {"mean"}, lambda ns: (ns.BATCH, ns.DIM2)),
    "reduce_max.py": ("reduce_max", "memory", {"amax"}, lambda ns: (ns.ROWS,)),
    "logsumexp.py": ("logsumexp", "memory", {"logsumexp"}, lambda ns: (ns.ROWS,)),
    "mlp.py": ("mlp", "compute", {"addmm", "gelu"}, lambda ns: (ns.BATCH, ns.OUT_FEATURES)),
    "residual_block.py": (
        "residual_block",
        "compute",
        {"native_layer_norm", "addmm", "relu", "add"},
        lambda ns: (ns.TOKENS, ns.HIDDEN),
    ),
    "gpt_block.py": (
        "transformer_block",
        "compute",
        {"native_layer_norm", "addmm", "_softmax", "tanh", "masked_fill"},
        lambda ns: (ns.BATCH, ns.SEQ, ns.HEADS * ns.HEAD_DIM),
    ),
    "swiglu_gate.py": (
        "gated_activation",
        "memory",
        {"silu", "mul"},
        lambda ns: (ns.TOKENS, ns.INTERMEDIATE),
    ),
    "broadcasting.py": (
        "broadcast",
        "memory",
        {"mul", "add", "sigmoid"},
        lambda ns: (ns.BATCH, ns.CHANNELS, ns.HEIGHT, ns.WIDTH),
    ),
    "big_gemm.py": ("gemm", "compute", {"mm"}, lambda ns: (ns.M, ns.N)),
    "bf16_gelu_chain.py": (
        "half_precision",
        "memory",
        {"gelu", "mul", "add"},
        lambda ns: (ns.ROWS, ns.COLS),
    ),
    "softmax_dim1_3d.py": (
        "non_last_dim_reduction",
        "memory",
        {"_softmax"},
        lambda ns: (ns.BATCH, ns.CHANNELS, ns.LENGTH),
    ),
    "log_softmax.py": (
        "log_softmax",
        "memory",
        {"mul", "sub", "_log_softmax"},
        lambda ns: (ns.ROWS, ns.COLS),
    ),
}

REQUIRED_CATEGORIES = {
    "elementwise", "gemm_epilogue", "conv_epilogue", "softmax", "layernorm", "reduce_sum",
    "reduce_mean", "reduce_max", "logsumexp", "mlp", "residual_block", "gated_activation",
    "broadcast", "gemm", "half_precision", "non_last_dim_reduction", "log_softmax",
}  # fmt: skip


class _AtenOps(TorchDispatchMode):
    """Records the aten op names a forward dispatches (works on meta tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _run_on_meta(problem):
    with torch.device("meta"):
        model = problem.build()
        inputs = problem.inputs()
    assert all(t.device.type == "meta" for t in inputs if isinstance(t, torch.Tensor))
    ops, flops = _AtenOps(), FlopCounterMode(display=False)
    with torch.no_grad(), flops, ops:
        out = model(*inputs)
    return model, inputs, out, ops.ops, flops.get_total_flops()


def _shrink_constants(namespace, limit: int = 16) -> None:
    """Cap every UPPERCASE int constant, the way benchmarks shrink problems for a quick run."""
    for name, value in list(vars(namespace).items()):
        if name.isupper() and type(value) is int and value > limit:
            setattr(namespace, name, limit)


def test_table_matches_files():
    files = {p.name for p in EXAMPLES.glob("*.py")}
    assert files == set(SUITE), "register new examples in SUITE (and drop removed ones)"
    assert len(files) >= 15
    assert REQUIRED_CATEGORIES <= {category for category, *_ in SUITE.values()}
    bounds = {bound for _, bound, *_ in SUITE.values()}
    assert bounds == {"memory", "compute"}


@pytest.mark.parametrize(
    "path",
    sorted(EXAMPLES.glob("*.py")) + sorted(USER_STYLE.glob("*.py")),
    ids=lambda p: p.relative_to(EXAMPLES).as_posix(),
)
def test_every_file_scans_cleanly(path):
    scan = scan_source(path.read_text(encoding="utf-8"))
    assert scan.error is None
    assert scan.problems(), "no nn.Module class found"
    for module in scan.problems():
        assert module.forward_line is not None
        assert module.line < module.forward_line <= module.end_line


@pytest.mark.parametrize("name", sorted(SUITE))
def test_kernelbench_example(name):
    category, bound, expected_ops, expected_shape = SUITE[name]
    path = EXAMPLES / name
    info = resolve_module(path, None)
    assert (info.name, info.inputs_fn, info.init_inputs_fn) == (
        "Model",
        "get_inputs",
        "get_init_inputs",
    )
    problem = load_problem(path)
    ns = problem.namespace
    assert any(k.isupper() and type(v) is int for k, v in vars(ns).items()), "no shape constants"

    model, inputs, out, ops, flops = _run_on_meta(problem)
    assert isinstance(out, torch.Tensor) and out.device.type == "meta"
    assert tuple(out.shape) == expected_shape(ns)
    # Inputs are fp32 except in the half-precision example, and the output keeps that dtype.
    dtypes = {t.dtype for t in inputs}
    assert dtypes == ({torch.bfloat16} if category == "half_precision" else {torch.float32})
    assert out.dtype in dtypes
    assert expected_ops <= ops, f"forward dispatched {sorted(ops)}"

    moved = _nbytes(inputs) + _nbytes([out]) + _nbytes(model.parameters())
    assert moved <= MAX_BYTES
    if bound == "memory":
        assert flops == 0 and moved >= MIN_MEMORY_BOUND_BYTES, (flops, moved / MB)
    else:
        assert flops / moved >= COMPUTE_BOUND_INTENSITY, (flops, moved / MB)


@pytest.mark.parametrize("name", sorted(SUITE))
def test_shrunk_example_runs_on_cpu(name):
    """The constants really drive the shapes, and the forward computes finite values on CPU."""
    expected_shape = SUITE[name][3]
    problem = load_problem(EXAMPLES / name)
    full_bytes = _nbytes(t for t in _run_on_meta(problem)[1])
    _shrink_constants(problem.namespace)
    torch.manual_seed(0)
    model = problem.build()
    inputs = problem.inputs()
    assert _nbytes(inputs) * 100 < full_bytes
    with torch.no_grad():
        out = model(*inputs)
    assert tuple(out.shape) == expected_shape(problem.namespace)
    assert torch.isfinite(out.float()).all()


def test_user_style_two_modules():
    path = USER_STYLE / "encoder_gated_mlp.py"
    scan = scan_source(path.read_text(encoding="utf-8"))
    assert {m.name for m in scan.problems()} == {"Encoder", "GatedMLP"}
    encoder, gated = scan.module("Encoder"), scan.module("GatedMLP")
    assert not encoder.has_inputs
    assert "get_inputs_Encoder" in encoder.missing_inputs_message()
    assert (gated.inputs_fn, gated.init_inputs_fn) == (
        "get_inputs_GatedMLP",
        "get_init_inputs_GatedMLP",
    )
    with pytest.raises(ProblemError, match="several modules"):
        resolve_module(path, None)
    with pytest.raises(ProblemError, match="get_inputs_Encoder"):
        load_problem(path, "Encoder")

    problem = load_problem(path, "GatedMLP")
    _, _, out, ops, flops = _run_on_meta(problem)
    ns = problem.namespace
    assert tuple(out.shape) == (ns.TOKENS, ns.DIM)
    assert {"mm", "silu", "mul"} <= ops and flops > 0


def test_user_style_sole_module_uses_plain_names():
    path = USER_STYLE / "fused_norm.py"
    info = resolve_module(path, None)
    assert (info.name, info.inputs_fn, info.init_inputs_fn) == (
        "FusedNorm",
        "get_inputs",
        "get_init_inputs",
    )
    problem = load_problem(path)
    _, inputs, out, _, _ = _run_on_meta(problem)
    assert out.shape == inputs[0].shape
    assert _nbytes(inputs) >= MIN_MEMORY_BOUND_BYTES

    # Against a reference RMSNorm on small CPU tensors: the example computes what it says.
    _shrink_constants(problem.namespace)
    model = problem.build()
    with torch.no_grad():
        model.weight.uniform_(0.5, 1.5)
    x, residual = problem.inputs()
    h = x + residual
    expected = h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + problem.namespace.EPS)
    torch.testing.assert_close(model(x, residual), expected * model.weight)
