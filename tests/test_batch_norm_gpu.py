"""batch_norm on a GPU: the statistics kernel against torch (means, inverse deviations and the
running statistics it updates) over layouts and odd shapes; the modules of
tests/test_batch_norm.py generated and compared with their references at two shapes, running
statistics included; KernelBench's batch_norm problems generated and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import (  # noqa: E402
    BatchStatsSpec,
    ElementwiseOp,
    TensorArg,
)
from test_batch_norm import CASES, CONV_BATCH_NORM, DENSE_BLOCK  # noqa: E402
from test_codegen import batch_stats_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_compiler_gpu import generate, import_candidate  # noqa: E402
from test_norms import write  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

F = torch.nn.functional
PLAIN = BatchStatsSpec("bstats_plain", (TensorArg("x", "float32"), TensorArg("rm", "float32"),
                                        TensorArg("rv", "float32")), 1e-5, 0.3, running_mean="rm",
                       running_var="rv")
# BIAS_RELU: a prologue reading the input and a per-channel operand only (the NCHW 16-byte form)
BIAS_RELU = BatchStatsSpec("bstats_bias_relu", (TensorArg("x", "float32"), TensorArg("b", "float32")), 1e-5, 0.1,
                           (ElementwiseOp("add", ("x", "b"), "t"), ElementwiseOp("relu", ("t",), "u")), "u", ("b",))
# (8, 16, 33, 35) ... (64, 32, 1, 1): planes of a size not a multiple of 4, rows ([N, C], 1 x 1);
# (4, 6, 36, 20), (16, 3, 128, 96): NCHW planes of a multiple of 4 values (16-byte loads)
SHAPES = [(8, 16, 33, 35), (3, 7, 5, 6, 7), (257, 45), (1, 3, 2), (64, 32, 1, 1), (4, 6, 36, 20), (16, 3, 128, 96)]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_batch_norm_gpu_tests", batch_stats_specs() + [PLAIN, BIAS_RELU])


def _kernel_names(fn, *args) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return {k.key for k in prof.key_averages()}


def test_an_empty_batch_or_no_channels_gives_zero_statistics_without_a_crash(ext):
    """N = 0 or C = 0: zero statistics and untouched running statistics (the partition's host
    divisions by the part length and the channel blocks must not run)."""
    for shape in [(0, 4, 3, 4), (2, 0, 3, 4), (0, 4)]:
        x = torch.randn(*shape, device="cuda")
        rm, rv = torch.randn(shape[1], device="cuda"), torch.rand(shape[1], device="cuda")
        before = rm.clone(), rv.clone()
        stats = ext.bstats_plain(x, rm, rv)
        assert stats.shape == (2, shape[1]) and not stats.any()
        assert torch.equal(rm, before[0]) and torch.equal(rv, before[1])


@pytest.mark.parametrize("shape", [(4, 6, 36, 20), (16, 3, 128, 96), (2, 5, 7, 9)], ids=str)
def test_nchw_planes_of_a_multiple_of_4_values_take_16_byte_loads(ext, shape):
    """The NCHW statistics pass in float4s where each plane's values are dense and a multiple of 4
    (a per-channel operand in the prologue), the scalar form otherwise (odd plane, a strided
    view, a misaligned copy): torch's statistics either way."""
    torch.manual_seed(shape[-1])
    x = torch.randn(*shape, device="cuda") * 2 + 3
    b = torch.randn(shape[1], 1, 1, device="cuda")
    storage = torch.empty(x.numel() + 1, device="cuda")
    shifted = storage[1:].view(x.shape)  # 4 bytes past a 16-byte boundary
    shifted.copy_(x)
    v = torch.relu(x + b)
    for label, view, vec in [("contiguous", x, x[0, 0].numel() % 4 == 0), ("misaligned", shifted, False),
                             ("strided", x[..., ::2], False)]:
        want = v if label != "strided" else torch.relu(view + b)
        stats = ext.bstats_bias_relu(view, b)
        torch.testing.assert_close(stats[0], want.mean([0, 2, 3]), rtol=1e-5, atol=1e-5, msg=lambda m, label=label: f"{label}: {m}")
        torch.testing.assert_close(stats[1], torch.rsqrt(want.var([0, 2, 3], unbiased=False) + 1e-5), rtol=1e-4,
                                   atol=1e-5, msg=lambda m, label=label: f"{label}: {m}")
        names = _kernel_names(ext.bstats_bias_relu, view, b)
        assert vec == any("bstats_bias_relu_partial<false, false, true>" in k for k in names), (label, names)


def _layouts(x: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    out = [("contiguous", x)]
    if x.dim() == 4:
        out.append(("channels_last", x.contiguous(memory_format=torch.channels_last)))
    if x.dim() == 5:
        out.append(("channels_last_3d", x.contiguous(memory_format=torch.channels_last_3d)))
    out.append(("strided", x[..., ::2] if x.shape[-1] > 2 else x.transpose(0, 1).contiguous().transpose(0, 1)))
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_statistics_and_running_stats_match_torch(ext, shape):
    torch.manual_seed(len(shape))
    base = torch.randn(*shape, device="cuda") * 3 + 5  # an offset mean: variance by cancellation would show
    for label, x in _layouts(base):
        dims = [0] + list(range(2, x.dim()))
        rm, rv = torch.randn(x.shape[1], device="cuda"), torch.rand(x.shape[1], device="cuda") + 0.5
        want_rm, want_rv = rm.clone(), rv.clone()
        F.batch_norm(x, want_rm, want_rv, training=True, momentum=0.3, eps=1e-5)
        stats = ext.bstats_plain(x, rm, rv)
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        torch.testing.assert_close(stats[0], mean, rtol=1e-5, atol=1e-5, msg=lambda m, label=label: f"{label}: {m}")
        torch.testing.assert_close(stats[1], torch.rsqrt(var + 1e-5), rtol=1e-4, atol=1e-5,
                                   msg=lambda m, label=label: f"{label}: {m}")
        torch.testing.assert_close(rm, want_rm, rtol=1e-5, atol=1e-5, msg=lambda m, label=label: f"{label} running_mean: {m}")
        torch.testing.assert_close(rv, want_rv, rtol=1e-4, atol=1e-5, msg=lambda m, label=label: f"{label} running_var: {m}")


def test_prologue_with_channel_and_full_operands(ext):
    """A full operand of the prologue needs the logical index, also on the channels-last (flat) path."""
    base = torch.randn(4, 6, 9, 11, device="cuda")
    b, y = torch.randn(6, 1, 1, device="cuda"), torch.randn(9, 11, device="cuda")
    for label, x in _layouts(base)[:2]:
        rm, rv = torch.zeros(6, device="cuda"), torch.ones(6, device="cuda")
        v = torch.relu((x + b) * y)
        stats = ext.bstats_full(x, b, y, rm, rv)
        torch.testing.assert_close(stats[0], v.mean([0, 2, 3]), rtol=1e-5, atol=1e-6, msg=lambda m, label=label: f"{label}: {m}")
        torch.testing.assert_close(stats[1], torch.rsqrt(v.var([0, 2, 3], unbiased=False) + 1e-5), rtol=1e-4, atol=1e-5,
                                   msg=lambda m, label=label: f"{label}: {m}")
        torch.testing.assert_close(rv, 0.9 + 0.1 * v.var([0, 2, 3], unbiased=True), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, label=label: f"{label}: {m}")


def test_one_value_per_channel_is_refused_like_torch(ext):
    with pytest.raises(RuntimeError, match="more than 1 value per channel"):
        ext.bstats_plain(torch.randn(1, 4, device="cuda"), torch.zeros(4, device="cuda"), torch.ones(4, device="cuda"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_matches_its_reference_at_two_shapes(name, tmp_path):
    module_matches_reference(*CASES[name], tmp_path)


def _matches_and_updates_running_statistics(path, program, cuda_graph: bool,
                                            shape: tuple[int, ...] = (4, 3, 13, 17)) -> None:
    """`program` (generated from the module at `path`) against the original over three
    training-mode calls on inputs of `shape`, launched or replayed from a CUDA graph: outputs and
    every running statistic."""
    from kernelstitch.core.problem import load_problem

    problem = load_problem(path, None)
    torch.manual_seed(0)
    reference = problem.module_class(*problem.get_init_inputs()).cuda()
    candidate = import_candidate(program)
    new = candidate.ModelNew(*problem.get_init_inputs()).cuda()
    new._cuda_graphs = candidate._CudaGraphs() if cuda_graph else None
    new.load_state_dict(reference.state_dict())
    for _ in range(3):
        x = torch.randn(*shape, device="cuda") * 3 + 1
        with torch.no_grad():
            torch.testing.assert_close(new(x), reference(x), rtol=1e-4, atol=1e-4)
    keys = [k for k in reference.state_dict() if k.endswith(("running_mean", "running_var"))]
    assert keys
    for key in keys:
        torch.testing.assert_close(new.state_dict()[key], reference.state_dict()[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["launched", "graph-replayed"])
def test_generated_module_updates_the_running_statistics_as_the_original(tmp_path, cuda_graph):
    """Replayed from a CUDA graph too: the warm-up run before the capture must not count."""
    path = write(tmp_path, CONV_BATCH_NORM)
    _matches_and_updates_running_statistics(path, generate((path, None), tmp_path, None), cuda_graph)


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["launched", "graph-replayed"])
def test_a_dense_block_merging_its_parts_statistics_updates_every_running_statistic(tmp_path, cuda_graph):
    """DENSE_BLOCK's plan merges each layer's statistics from its parts' (test_batch_norm): the
    merge kernel copies them and updates the running statistics from 1 / rstd^2 - eps."""
    path = write(tmp_path, DENSE_BLOCK)
    program = generate((path, None), tmp_path, None)
    assert "batch_stats_merge" in program.read_text()
    _matches_and_updates_running_statistics(path, program, cuda_graph, (3, 6, 11, 13))


@pytest.mark.parametrize("problem", [
    "level3/14_DenseNet121DenseBlock.py",
    "level2/73_Conv2d_BatchNorm_Scaling.py", "level2/39_Gemm_Scale_BatchNorm.py",
    "level2/72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool.py", "level2/52_Conv2d_Activation_BatchNorm.py"])
def test_kernelbench_problem_generates_and_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)


def test_a_graph_captured_with_tf32_off_never_serves_a_caller_with_it_on(tmp_path):
    """A replay repeats the kernels captured: a graph captured under other cuBLAS / cuDNN TF32
    settings than the caller's is captured again, the old one dropped (the Verifier checks in
    strict fp32 and times under PyTorch's defaults)."""
    from kernelstitch.core.problem import load_problem

    path = write(tmp_path, CONV_BATCH_NORM)
    problem = load_problem(path, None)
    candidate = import_candidate(generate((path, None), tmp_path, None))
    new = candidate.ModelNew(*problem.get_init_inputs()).cuda()
    new._cuda_graphs = candidate._CudaGraphs()
    x = torch.randn(4, 3, 13, 17, device="cuda")
    before = torch.backends.cudnn.allow_tf32
    seen = []
    try:
        for allow in (False, True, False, True):
            torch.backends.cudnn.allow_tf32 = allow
            with torch.no_grad():
                new(x)
            graphs = new._cuda_graphs._graphs
            assert len(graphs) == 1  # one graph per signature
            seen.append(next(iter(graphs.values()))[3])
            assert seen[-1] == candidate._CudaGraphs._precision_settings()  # captured as called
    finally:
        torch.backends.cudnn.allow_tf32 = before
    assert seen[0] == seen[2] != seen[1] == seen[3]


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["launched", "graph-replayed"])
def test_pytorch_batch_norm_variant_matches_and_updates_the_running_statistics(tmp_path, cuda_graph):
    """The search's round-2 variant with PyTorch's batch_norm (cuDNN) in place of our kernels
    (variants.batch_norm_in_pytorch), launched and replayed from a CUDA graph: outputs and
    running statistics as the original's after three calls."""
    from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
    from kernelstitch.agents.planner.capture import capture
    from kernelstitch.agents.planner.variants import batch_norm_in_pytorch, propose_variants

    path = write(tmp_path, CONV_BATCH_NORM)
    graph = capture(path)
    variant = batch_norm_in_pytorch(propose_variants(graph, limit=1)[0], graph)
    assert variant is not None and any(s.technique == "pytorch_fallback" for s in variant.plan.steps)
    program = write_candidate(code_builtin(variant.plan, path, tmp_path / "bn_pt" / "model_new.py"),
                              tmp_path / "bn_pt")
    _matches_and_updates_running_statistics(path, program, cuda_graph)


def _group_stats_reference(v: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    var, mean = torch.var_mean(v.reshape(v.shape[0] * groups, -1).double(), 1, correction=0)
    return torch.stack((mean, torch.rsqrt(var + eps))).float()


@pytest.mark.parametrize("shape", [(3, 8, 9, 7), (128, 64, 12, 13), (2, 12, 5, 6, 7), (5, 8), (2, 8, 1, 1)], ids=str)
def test_group_statistics_read_nchw_and_channels_last_sources_as_they_lie(ext, shape):
    """group_norm's statistics (BatchStatsSpec.groups, the gn-stats variant's kernel) per
    (sample, group) with a conv bias in the prologue: channels-last sources take per-sample parts
    merged per group, NCHW ones a group as a row (the bias picked per value), strided views a
    copy; torch's group statistics every time."""
    torch.manual_seed(shape[0] * 7 + len(shape))
    x = torch.randn(*shape, device="cuda") * 3 + 1
    b = torch.randn(shape[1], *([1] * (len(shape) - 2)), device="cuda")
    layouts = [("contiguous", x)] + ([("strided", x[..., ::2])] if len(shape) > 2 and shape[-1] > 1 else [])
    if len(shape) in (4, 5):
        fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        layouts.append(("channels_last", x.contiguous(memory_format=fmt)))
    for label, view in layouts:
        want = _group_stats_reference(view + b, 4, 1e-5)
        got = ext.bstats_groups(view, b)
        assert got.shape == want.shape, label
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=label)
        bare = ext.bstats_groups_bare(view)
        torch.testing.assert_close(bare, _group_stats_reference(view, 2, 1e-5), atol=1e-4, rtol=1e-4, msg=label)


def test_group_statistics_of_one_value_groups_and_empty_inputs(ext):
    """A group of one value is valid (variance 0, as torch's group_norm has it); empty inputs give
    [2, N * groups] statistics without a launch (zeros, or none for N = 0)."""
    x, b = torch.randn(5, 4, device="cuda"), torch.randn(4, device="cuda")
    torch.testing.assert_close(ext.bstats_groups(x, b), _group_stats_reference(x + b, 4, 1e-5), atol=1e-4, rtol=1e-4)
    for shape in [(0, 8, 3, 3), (2, 8, 0, 3)]:
        stats = ext.bstats_groups(torch.randn(*shape, device="cuda"), torch.randn(8, 1, 1, device="cuda"))
        assert stats.shape == (2, shape[0] * 4) and not stats.any()
