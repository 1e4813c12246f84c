"""Roofline arithmetic, the peak cache, shape-based costs, the Findings JSON contract, nsys CSV."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kernelstitch.profiler import costmodel, roofline
from kernelstitch.profiler.findings import Finding, ProfileReport, Roofline
from kernelstitch.profiler.nsys import NsysError, parse_stats_csv
from test_profiler_support import H100_LIKE, kernel, op, tensor


def test_floor_is_the_slower_of_bytes_and_flops():
    # 3 GB at 3 TB/s = 1 ms; 7e11 FLOP at 700 TFLOP/s = 1 ms; 7e12 FLOP = 10 ms
    assert roofline.floor_seconds(3e9, 0, H100_LIKE, "fp16") == pytest.approx(1e-3)
    assert roofline.floor_seconds(3e9, 7e12, H100_LIKE, "fp16") == pytest.approx(1e-2)
    assert roofline.floor_seconds(0, 5e10, H100_LIKE, "fp32") == pytest.approx(1e-3)


def test_ridge_point_and_bound():
    assert roofline.ridge_point(H100_LIKE, "bf16") == pytest.approx(7e14 / 3e12)
    assert roofline.bound_of(1e6, 1e6, H100_LIKE, "fp16") == "memory"
    assert roofline.bound_of(1e6, 1e9, H100_LIKE, "fp16") == "compute"


def test_pct_of_floor_for_kernel_and_module():
    assert kernel(us=40.0, floor_us=10.0).pct_of_floor == pytest.approx(25.0)
    assert kernel(us=40.0).pct_of_floor is None
    roof = Roofline(H100_LIKE, 3e6, 0.0, 9e6, floor_ms=0.001, actual_ms=0.004, bound="memory")
    assert roof.pct_of_floor == pytest.approx(25.0)


def test_peak_cache_round_trip(tmp_path):
    path = roofline.cache_path(tmp_path)
    assert roofline.load_cached_peaks("test-H100", path) is None
    roofline.store_peaks(H100_LIKE, path)
    assert roofline.load_cached_peaks("test-H100", path) == H100_LIKE
    assert roofline.load_cached_peaks("other GPU", path) is None


def test_peaks_from_measurement_reads_task_output():
    peaks = roofline.peaks_from_measurement(
        {"dram_bytes_per_s": 3.0e12, "bf16_flops_per_s": 7.9e14, "fp32_flops_per_s": 5e13,
         "device": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132}}
    )  # fmt: skip
    assert peaks.flops_per_s == {"bf16": 7.9e14, "fp32": 5e13} and peaks.sm_count == 132


def test_gemm_cost_from_shapes():
    x, w, b, y = (
        tensor("x", [2048, 1024]),
        tensor("w", [4096, 1024]),
        tensor("b", [4096]),
        tensor("y", [2048, 4096]),
    )
    cost = costmodel.op_cost(op(0, "linear", 13, [x, w, b], [y]))
    assert cost.category == "gemm" and cost.dtype == "fp16"
    assert cost.flops == 2 * 2048 * 4096 * 1024
    assert cost.bytes == (2048 * 1024 + 4096 * 1024 + 4096 + 2048 * 4096) * 2


def test_elementwise_cost_counts_a_tensor_read_twice_once():
    a, out = tensor("a", [1000], "fp32"), tensor("o", [1000], "fp32")
    cost = costmodel.op_cost(op(0, "Tensor.mul", 1, [a, a], [out]))  # a * a
    assert cost.category == "elementwise" and cost.bytes == 8000 and cost.flops == 1000


def test_categories():
    assert costmodel.categorize("softmax") == "reduction"
    assert costmodel.categorize("Tensor.contiguous") == "copy"
    assert costmodel.categorize("Tensor.add_") == "elementwise"
    assert costmodel.categorize("conv2d") == "gemm"
    assert costmodel.kernel_uses_tensor_cores("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT")
    assert not costmodel.kernel_uses_tensor_cores("vectorized_elementwise_kernel")


def test_report_json_round_trip():
    report = ProfileReport(
        device="H100", module="Model",
        kernels=[kernel("k", us=12.5, source_line=14, metrics={"x": 1.0})],
        findings=[Finding("r", "warning", "msg", "why", "fix", 14, "k", {"a": 1.0}, [15])],
        roofline=Roofline(H100_LIKE, 1.0, 2.0, 3.0, 0.5, 1.0, "memory"),
        backends_used=["torch.profiler"], notes=["n"], forward_ms=0.2,
    )  # fmt: skip
    back = ProfileReport.from_json(report.to_json())
    assert back == report
    assert back.findings_for_line(15)[0].rule == "r" and back.kernels_for_line(14)


def test_finding_rejects_unknown_severity():
    with pytest.raises(ValueError):
        Finding("r", "fatal", "m", "e", "s")


def test_findings_module_is_torch_free():
    code = "import sys, kernelstitch.profiler.findings; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_analysis_modules_import_without_torch():
    code = (
        "import sys; import kernelstitch.profiler.analyze, kernelstitch.profiler.profile, "
        "kernelstitch.profiler.cli; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# Synthetic: nsys cannot produce reports on the GPU machines available to this project, so this
# CSV is written by hand in the documented `nsys stats --format csv -r cuda_gpu_kern_sum` layout.
SYNTHETIC_KERN_SUM = """\
Generating SQLite file report.sqlite from report.nsys-rep
Processing [report.sqlite] with [cuda_gpu_kern_sum.py]...
"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"
"61.2","1,234,567","3","411,522.3","411,000.0","410,100","413,467","1,700.2","nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNN"
"38.8","782,100","9","86,900.0","86,500.0","85,000","89,000","1,200.0","void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>(int, T2, T3)"
"""
SYNTHETIC_API_SUM = """\
"Time (%)","Total Time (ns)","Num Calls","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"
"90.0","50,000","12","4,166.7","4,000.0","3,500","6,000","700.0","cudaLaunchKernel"
"""


def test_nsys_kern_sum_synthetic_csv():
    rows = parse_stats_csv(SYNTHETIC_KERN_SUM)
    assert [r.instances for r in rows] == [3, 9]
    assert rows[0].total_ns == 1234567 and rows[1].avg_ns == pytest.approx(86900.0)
    assert rows[1].name.startswith("void at::native::vectorized_elementwise_kernel<4")


def test_nsys_api_sum_synthetic_csv():
    (row,) = parse_stats_csv(SYNTHETIC_API_SUM)
    assert row.name == "cudaLaunchKernel" and row.instances == 12 and row.max_ns == 6000


def test_nsys_rejects_non_csv():
    with pytest.raises(NsysError):
        parse_stats_csv("ERROR: no report")


def test_render_table_findings_and_roofline_png(tmp_path):
    from kernelstitch.profiler.render import plot_roofline, print_report
    from rich.console import Console

    report = ProfileReport(
        device="H100", module="Model",
        kernels=[kernel("void at::native::vectorized_elementwise_kernel<4>(int)", us=20.0,
                        source_line=14, bytes=16e6, flops=4e6, floor_us=5.0),
                 kernel("nvjet_hsh_gemm", us=40.0, source_line=13, bytes=12e6, flops=8.6e9,
                        category="gemm", dtype="fp16")],
        findings=[Finding("fusable-elementwise-chain", "warning", "3 elementwise kernels re-read "
                          "this tensor: fusable", "why", "fix", 13)],
        roofline=Roofline(H100_LIKE, 16e6, 8.6e9, 28e6, 0.0123, 0.06, "compute"),
        backends_used=["torch.profiler"], forward_ms=0.06,
    )  # fmt: skip
    console = Console(record=True, width=140)
    print_report(report, console)
    text = console.export_text()
    assert "vectorized_elementwise_kernel" in text and "line 13: 3 elementwise" in text
    assert "25" in text  # 5 us floor / 20 us = 25% of floor
    png = plot_roofline(report, tmp_path / "roof.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
