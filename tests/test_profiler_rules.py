"""Each rule fires on a metric set that should trigger it and stays silent on one that should not."""

from __future__ import annotations

from kernelstitch.profiler import ncu as m
from kernelstitch.profiler import rules
from kernelstitch.profiler.rules import RuleContext
from test_profiler_support import H100_LIKE, kernel, op, tensor


def ctx(kernels, **kw) -> RuleContext:
    return RuleContext(kernels=kernels, peaks=H100_LIKE, **kw)


def test_memory_bound_fires_below_half_of_peak_from_ncu_metrics():
    slow = kernel(
        us=100, source_line=14, metrics={m.DRAM_PCT: 21.0, m.SM_PCT: 10.0, m.MEMORY_PCT: 22.0}
    )
    found = rules.memory_bound_low_bandwidth(ctx([slow]))
    assert len(found) == 1
    assert found[0].source_line == 14 and "21% of peak DRAM" in found[0].message


def test_memory_bound_silent_when_near_peak_or_l2_bound_or_compute_bound():
    fast = kernel(us=100, metrics={m.DRAM_PCT: 85.0, m.SM_PCT: 10.0})
    from_l2 = kernel(us=100, metrics={m.DRAM_PCT: 10.0, m.SM_PCT: 10.0, m.MEMORY_PCT: 90.0})
    compute = kernel(us=100, metrics={m.DRAM_PCT: 20.0, m.SM_PCT: 80.0})
    gemm = kernel(us=100, category="gemm", metrics={m.DRAM_PCT: 5.0})
    assert rules.memory_bound_low_bandwidth(ctx([fast, from_l2, compute, gemm])) == []


def test_memory_bound_from_shape_estimate_without_ncu():
    # 8 MB in 100 us = 80 GB/s against 3 TB/s: 3% of peak, intensity 0.25 FLOP/byte
    slow = kernel(us=100, bytes=8e6, flops=2e6, dtype="fp16", source_line=15)
    assert rules.memory_bound_low_bandwidth(ctx([slow]))[0].metrics["dram_pct"] < 5
    fast = kernel(us=4, bytes=8e6, flops=2e6, dtype="fp16")  # 2 TB/s: 67%
    assert rules.memory_bound_low_bandwidth(ctx([fast])) == []


def _chain_ops():
    x, w, y1, y2, y3, y4 = (tensor(n, [2048, 2048]) for n in ("x", "w", "y1", "y2", "y3", "y4"))
    return [
        op(0, "linear", 13, [x, w], [y1]),
        op(1, "Tensor.mul", 14, [y1], [y2]),
        op(2, "Tensor.add", 15, [y2], [y3]),
        op(3, "relu", 16, [y3], [y4]),
    ]


def test_fusable_chain_names_lines_and_bytes():
    ops = _chain_ops()
    ks = [kernel("nvjet_gemm", category="gemm", op_index=0, source_line=13)] + [
        kernel(op_index=i, source_line=13 + i, category="elementwise") for i in (1, 2, 3)
    ]
    found = rules.fusable_chains(ctx(ks, ops=ops))
    assert len(found) == 1
    f = found[0]
    assert f.message == "3 elementwise kernels re-read this tensor: fusable"
    assert f.source_line == 13 and f.related_lines == [14, 15, 16]
    assert f.metrics["bytes_saved"] == 2 * 3 * 2048 * 2048 * 2  # 3 intermediates, fp16
    assert "epilogue" in f.explanation


def test_fusable_chain_silent_when_intermediate_has_two_readers():
    a, b, c, d = (tensor(n, [1024, 1024]) for n in "abcd")
    ops = [op(0, "Tensor.mul", 14, [a], [b]), op(1, "Tensor.add", 15, [b], [c]),
           op(2, "Tensor.sub", 16, [b], [d])]  # fmt: skip
    ks = [kernel(op_index=i, source_line=14 + i) for i in range(3)]
    assert rules.fusable_chains(ctx(ks, ops=ops)) == []


def test_launch_bound_fires_when_gpu_mostly_idle():
    ks = [kernel(us=3.0, source_line=14 + i) for i in range(12)]  # 36 us of work
    found = rules.host_bound(ctx(ks, forward_ms=0.2, forward_wall_ms=0.2, forward_line=12))
    assert found and found[0].rule == "launch-bound" and found[0].source_line == 12
    assert "CUDA graph" in found[0].suggestion


def test_launch_bound_silent_when_gpu_busy_with_big_kernels():
    ks = [kernel(us=500.0), kernel(us=480.0)]
    assert rules.host_bound(ctx(ks, forward_ms=1.0, forward_wall_ms=0.3)) == []


def test_uncoalesced_fires_on_sector_efficiency_and_sectors_per_request():
    by_pct = kernel(us=50, metrics={m.BYTES_PER_SECTOR_LD_PCT: 12.5})
    by_ratio = kernel(us=50, metrics={m.LD_SECTORS: 3200.0, m.LD_REQUESTS: 100.0})
    good = kernel(us=50, metrics={m.BYTES_PER_SECTOR_LD_PCT: 100.0, m.LD_SECTORS: 400.0,
                                  m.LD_REQUESTS: 100.0})  # fmt: skip
    assert len(rules.uncoalesced_access(ctx([by_pct, by_ratio, good]))) == 2
    assert rules.uncoalesced_access(ctx([good])) == []


def test_low_occupancy_names_the_limiter():
    k = kernel(us=80, metrics={m.ACHIEVED_OCCUPANCY: 12.0, m.THEORETICAL_OCCUPANCY: 18.75,
                               m.GRID_SIZE: 4096.0, m.LIMIT_REGISTERS: 1.0, m.LIMIT_WARPS: 8.0,
                               m.LIMIT_SMEM: 16.0, m.REGISTERS: 168.0})  # fmt: skip
    found = rules.low_occupancy(ctx([k]))
    assert len(found) == 1 and "registers per thread" in found[0].message
    healthy = kernel(us=80, metrics={m.ACHIEVED_OCCUPANCY: 70.0})
    tensor_gemm = kernel(us=80, metrics={m.ACHIEVED_OCCUPANCY: 12.0, m.TENSOR_GMMA_PCT: 60.0})
    assert rules.low_occupancy(ctx([healthy, tensor_gemm])) == []


def test_register_spills():
    spilling = kernel(metrics={m.LOCAL_LD: 1000.0, m.LOCAL_ST: 24.0, m.REGISTERS: 255.0})
    found = rules.register_spills(ctx([spilling, kernel(metrics={m.LOCAL_LD: 0.0})]))
    assert len(found) == 1 and "1,024" in found[0].message


def test_half_gemm_not_on_tensor_cores():
    cuda_core = kernel("gemmSN_kernel", category="gemm", dtype="fp16",
                       metrics={m.TENSOR_HMMA_PCT: 0.0, m.TENSOR_GMMA_PCT: 0.0})  # fmt: skip
    on_tc = kernel("nvjet_hsh_128x256", category="gemm", dtype="fp16",
                   metrics={m.TENSOR_GMMA_PCT: 55.0})  # fmt: skip
    found = rules.gemm_not_on_tensor_cores(ctx([cuda_core, on_tc]))
    assert [f.severity for f in found] == ["warning"]
    # without ncu the kernel name decides, at lower confidence
    named = rules.gemm_not_on_tensor_cores(
        ctx([kernel("gemv2T_kernel", category="gemm", dtype="bf16")])
    )
    assert named[0].severity == "info"
    assert (
        rules.gemm_not_on_tensor_cores(ctx([kernel("nvjet_hsh", category="gemm", dtype="bf16")]))
        == []
    )


def test_fp32_gemm_gets_a_hint():
    found = rules.gemm_not_on_tensor_cores(
        ctx([kernel("ampere_sgemm_128x64", category="gemm", dtype="fp32")])
    )
    assert found[0].severity == "hint"
    assert "--precision tf32" in found[0].suggestion  # the opt-in that acts on it


def test_tail_effect_few_blocks_and_partial_wave():
    few = kernel(us=40, metrics={m.GRID_SIZE: 64.0, m.SM_COUNT: 132.0})
    partial = kernel(us=40, metrics={m.GRID_SIZE: 145.0, m.SM_COUNT: 132.0, m.WAVES: 1.1})
    full = kernel(us=40, metrics={m.GRID_SIZE: 1056.0, m.SM_COUNT: 132.0, m.WAVES: 2.0})
    found = rules.tail_effect(ctx([few, partial, full]))
    assert [f.severity for f in found] == ["warning", "info"]
    assert "68 SMs idle" in found[0].message
    # trace grid sizes work without ncu
    assert rules.tail_effect(ctx([kernel(us=40, metrics={"trace_grid_blocks": 8.0})]))


def test_redundant_rereads_fan_out():
    x = tensor("x", [4096, 1024])
    outs = [tensor(f"o{i}", [4096, 1024]) for i in range(3)]
    ops = [op(i, f, 20 + i, [x], [outs[i]]) for i, f in enumerate(("sin", "cos", "exp"))]
    ks = [kernel(op_index=i, source_line=20 + i) for i in range(3)]
    found = rules.redundant_rereads(ctx(ks, ops=ops))
    assert len(found) == 1 and found[0].source_line == 20 and found[0].related_lines == [21, 22]
    assert rules.redundant_rereads(ctx(ks[:2], ops=ops[:2])) == []  # two readers: below threshold


def test_insignificant_kernels_are_ignored():
    big = kernel(us=5000)
    tiny = kernel(us=1.0, metrics={m.DRAM_PCT: 1.0, m.MEMORY_PCT: 1.0})
    assert rules.memory_bound_low_bandwidth(ctx([big, tiny])) == []


def test_short_name_strips_templates_and_namespaces():
    name = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T1)"
    )
    assert rules.short_name(name) == "vectorized_elementwise_kernel"


def test_run_rules_orders_by_severity():
    ks = [kernel(us=100, source_line=14, metrics={m.DRAM_PCT: 21.0, m.LOCAL_LD: 10.0}),
          kernel("ampere_sgemm", category="gemm", dtype="fp32", us=100)]  # fmt: skip
    severities = [f.severity for f in rules.run_rules(ctx(ks))]
    assert severities == sorted(severities, key=["error", "warning", "info", "hint"].index)


def test_short_name_handles_parens_in_templates_and_anonymous_namespaces():
    torch_name = ("void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous "
                  "namespace)::launch_clamp_scalar(at::TensorIteratorBase&)::{lambda()#1}>(int, T2)")  # fmt: skip
    ncu_name = "void at::vectorized_elementwise_kernel<8, at::<unnamed>::launch_clamp_scalar(at::TensorIteratorBase &)>(int)"
    assert (
        rules.short_name(torch_name)
        == rules.short_name(ncu_name)
        == "vectorized_elementwise_kernel"
    )
    assert rules.short_name(
        "void (anonymous namespace)::softmax_warp_forward<c10::Half>(c10::Half*)"
    ) == ("softmax_warp_forward")


def test_tail_effect_nearly_full_grid_is_only_info():
    nearly = kernel(us=40, metrics={m.GRID_SIZE: 128.0, m.SM_COUNT: 132.0})
    assert [f.severity for f in rules.tail_effect(ctx([nearly]))] == ["info"]
