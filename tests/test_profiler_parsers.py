"""torch.profiler trace and Nsight Compute CSV parsing: synthetic edge cases, then the real
outputs captured on an H100 (tests/fixtures/profiler/README.md says how)."""

from __future__ import annotations

import json

import pytest
from kernelstitch.profiler import ncu as m
from kernelstitch.profiler.analyze import Captured, align_ncu, build_report
from kernelstitch.profiler.costmodel import kernel_is_gemm
from kernelstitch.profiler.findings import DevicePeaks, ProfileReport
from kernelstitch.profiler.ncu import NcuError, NcuKernel, ncu_command, parse_ncu_csv, parse_number
from kernelstitch.profiler.oplog import parse_range_name, range_name
from kernelstitch.profiler.roofline import peaks_from_measurement
from kernelstitch.profiler.torch_trace import load_trace, parse_trace, timeline_stats
from test_profiler_support import FIXTURES, H100_LIKE, synthetic_trace

LINES = {13: "linear", 14: "mul", 15: "add", 16: "relu", 17: "softmax"}  # problem_small.py


def test_range_names_round_trip():
    assert parse_range_name(range_name(3, 14)) == (3, 14)
    assert parse_range_name(range_name(0, None)) == (0, None)
    assert parse_range_name("aten::mul") is None and parse_range_name("ks:opX:L1") is None


def test_synthetic_trace_ties_kernels_to_ranges_by_correlation():
    trace = synthetic_trace([("gemm_k", 0, 13, 50.0), ("ew_k", 1, 14, 10.0), ("ew_k", 2, 15, 10.0)])
    kernels = parse_trace(trace)
    assert [(k.name, k.op_index, k.line) for k in kernels] == [
        ("gemm_k", 0, 13), ("ew_k", 1, 14), ("ew_k", 2, 15)]  # fmt: skip
    assert kernels[0].aten_op == "aten::mul" and kernels[0].grid == [264, 1, 1]
    stats = timeline_stats(kernels)
    assert stats.kernels == 3 and stats.gpu_busy_us == 70.0
    assert stats.idle_gap_us == pytest.approx((100 - 50) + (100 - 10))
    assert stats.mean_launch_us == 4.0


def test_parse_number_handles_separators_and_na():
    assert (
        parse_number("1,234.5") == 1234.5
        and parse_number("n/a") is None
        and parse_number("") is None
    )


SYNTHETIC_NCU = """\
==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__bytes_read.sum","launch__grid_size"
"","","","","","","","","","","","usecond","Kbyte",""
"0","123","python","h","void k1<float>(int)","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","1,234.5","2,048","1,024"
"1","123","python","h","k2","1","7","(256, 1, 1)","(8, 1, 1)","0","9.0","3.5","n/a","8"
"""


def test_synthetic_ncu_csv_units_and_separators():
    kernels = parse_ncu_csv(SYNTHETIC_NCU)
    assert [k.name for k in kernels] == ["void k1<float>(int)", "k2"]
    assert kernels[0].metrics[m.DURATION] == pytest.approx(1_234_500.0)  # us -> ns
    assert kernels[0].metrics["dram__bytes_read.sum"] == 2_048_000.0  # Kbyte -> byte
    assert kernels[0].metrics[m.GRID_SIZE] == 1024.0 and kernels[0].block == "(128, 1, 1)"
    assert "dram__bytes_read.sum" not in kernels[1].metrics  # n/a is absent, not zero


def test_ncu_csv_without_header_raises():
    with pytest.raises(NcuError):
        parse_ncu_csv("==ERROR== something failed\n")


def test_ncu_command_filters_and_never_locks_clocks(tmp_path):
    cmd = ncu_command(tmp_path / "p.py", "Model", tmp_path / "log.csv", (m.DURATION,),
                      kernel_regex="elementwise", launch_skip=2, launch_count=5, python="py")  # fmt: skip
    text = " ".join(cmd)
    assert "--clock-control none" in text and "--profile-from-start off" in text
    assert "--page raw" in text and "--csv" in text and "-k regex:elementwise" in text
    assert "--launch-skip 2" in text and "--launch-count 5" in text
    assert cmd[-4:] == [
        "kernelstitch.profiler.ncu_target",
        str(tmp_path / "p.py"),
        "--module",
        "Model",
    ]


def test_align_ncu_greedy_skips_unmatched():
    trace = parse_trace(
        synthetic_trace([("void a<1>(int)", 0, 1, 1.0), ("b", 1, 2, 1.0), ("c", 2, 3, 1.0)])
    )
    ncu = [NcuKernel(0, "a"), NcuKernel(1, "c")]
    pairs = align_ncu(trace, ncu)
    assert pairs[0].name == "a" and pairs[2].name == "c" and 1 not in pairs


# ---- real captures (H100, 2026-11-22) ----------------------------------------------------------


def _fixture(name: str):
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not captured (see tests/fixtures/profiler/README.md)")
    return path


def _meta() -> dict:
    return json.loads(_fixture("torch_profile_meta.json").read_text())


def test_real_trace_maps_every_forward_kernel_to_its_line():
    kernels = [
        k
        for k in parse_trace(load_trace(_fixture("torch_trace.json.gz")))
        if k.category == "kernel"
    ]
    assert kernels, "no GPU kernels in the captured trace"
    lines = {k.line for k in kernels}
    assert set(LINES) <= lines, f"lines seen: {lines}"
    assert lines <= set(LINES) | {None}
    gemm = [k for k in kernels if k.line == 13]
    assert any(kernel_is_gemm(k.name) for k in gemm), [k.name for k in gemm]
    assert all(k.correlation is not None and k.launch_ts_us is not None for k in kernels)


def test_real_op_log_records_user_lines_and_dataflow():
    ops = _meta()["ops"]
    by_line = {o["line"]: o for o in ops if o["line"] in LINES}
    assert set(by_line) == set(LINES)
    assert by_line[13]["module"] == "linear" and by_line[13]["func"] == "linear"
    # y = y * 2.0 reads exactly what the linear wrote
    assert by_line[14]["inputs"][0]["id"] == by_line[13]["outputs"][0]["id"]


def test_real_ncu_csv_has_the_metrics_the_rules_read():
    kernels = parse_ncu_csv(_fixture("ncu_raw.csv").read_text())
    assert len(kernels) >= 5
    for k in kernels:
        assert k.metrics[m.DURATION] > 0
        assert k.metrics[m.GRID_SIZE] >= 1 and k.metrics[m.BLOCK_SIZE] >= 32
        assert 0 <= k.metrics[m.ACHIEVED_OCCUPANCY] <= 100
        assert m.DRAM_PCT in k.metrics and m.LD_SECTORS in k.metrics
    assert any(kernel_is_gemm(k.name) for k in kernels)


def _real_report() -> ProfileReport:
    peaks_data = json.loads(_fixture("device_peaks.json").read_text())
    return build_report(
        Captured(
            meta=_meta(),
            trace=load_trace(_fixture("torch_trace.json.gz")),
            peaks=peaks_from_measurement(peaks_data),
            ncu_kernels=parse_ncu_csv(_fixture("ncu_raw.csv").read_text()),
            backends_used=["torch.profiler", "ncu"],
        )
    )


def test_real_report_joins_ncu_metrics_and_finds_the_fusable_chain():
    report = _real_report()
    assert {k.source_line for k in report.kernels} >= set(LINES)
    with_ncu = [k for k in report.kernels if m.DURATION in k.metrics]
    assert len(with_ncu) == len([k for k in report.kernels if k.category != "copy"])
    chain = [f for f in report.findings if f.rule == "fusable-elementwise-chain"]
    assert chain and chain[0].source_line == 13 and {14, 15, 16} <= set(chain[0].related_lines)
    assert report.roofline and 0 < report.roofline.pct_of_floor <= 100
    assert ProfileReport.from_json(report.to_json()) == report


def test_real_device_peaks_are_plausible_for_an_h100():
    peaks = peaks_from_measurement(json.loads(_fixture("device_peaks.json").read_text()))
    assert isinstance(peaks, DevicePeaks) and peaks.sm_count == 132
    assert 1.5e12 < peaks.dram_bytes_per_s < 4e12
    assert 3e14 < peaks.flops_per_s["bf16"] < 1.2e15
    assert H100_LIKE.sm_count == peaks.sm_count


def test_build_report_on_a_synthetic_capture():
    from test_profiler_support import op, tensor

    y = [tensor(f"y{i}", [2048, 2048]) for i in range(4)]
    ops = [op(0, "linear", 13, [tensor("x", [2048, 1024]), tensor("w", [2048, 1024])], [y[0]]),
           op(1, "Tensor.mul", 14, [y[0]], [y[1]]), op(2, "Tensor.add", 15, [y[1]], [y[2]]),
           op(3, "relu", 16, [y[2]], [y[3]])]  # fmt: skip
    meta = {"iters": 1, "ops": [o.to_dict() for o in ops], "forward_ms": 0.2,
            "forward_wall_ms": 0.1, "input_bytes": 4 << 20, "param_bytes": 4 << 20,
            "output_bytes": 8 << 20, "module": "Model", "device": {"name": "test-H100"}}  # fmt: skip
    trace = synthetic_trace([("nvjet_hsh_gemm", 0, 13, 40.0)] +
                            [("vectorized_elementwise_kernel", i, 13 + i, 20.0) for i in (1, 2, 3)])  # fmt: skip
    report = build_report(Captured(meta=meta, trace=trace, peaks=H100_LIKE))
    assert [k.source_line for k in report.kernels] == [13, 14, 15, 16]
    assert (
        report.kernels[0].category == "gemm" and report.kernels[0].flops == 2 * 2048 * 2048 * 1024
    )
    assert report.kernels[1].bytes == 2 * 2048 * 2048 * 2
    rules_fired = {f.rule for f in report.findings}
    assert {
        "fusable-elementwise-chain",
        "roofline",
        "launch-bound",
        "memory-bound-low-bandwidth",
    } <= rules_fired
    # compute-bound: the GEMM's FLOPs at the fp16 peak outweigh 16 MiB at 3 TB/s
    flops = 2 * 2048 * 2048 * 1024 + 3 * 2048 * 2048
    assert report.roofline.bound == "compute"
    assert report.roofline.floor_ms == pytest.approx(flops / 7e14 * 1e3)
