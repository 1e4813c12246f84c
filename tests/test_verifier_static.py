"""Verifier: static rules, verdict assembly, diagnostics, trace reading, CLI (CPU, runs in CI)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from kernelstitch.agents.verifier.assemble import Inputs, assemble
from kernelstitch.agents.verifier.declaration import CandidateOrigin
from kernelstitch.agents.verifier.diagnostics import map_diagnostics, parse_compiler_output
from kernelstitch.agents.verifier.op_names import is_own_kernel
from kernelstitch.agents.verifier.runner import TaskOutcome
from kernelstitch.agents.verifier.static_checks import StaticReport, check_files, check_source
from kernelstitch.agents.verifier.stats import build_timings, significant, summarize
from kernelstitch.agents.verifier.trace_summary import reused_reference_ops, summarize_trace
from kernelstitch.agents.verifier.verdict import (
    COULD_NOT_VERIFY_CODES,
    REJECTION_CODES,
    Verdict,
    render_verdict_markdown,
)

CANDIDATES = Path(__file__).parent / "candidates"
REF = CANDIDATES / "ref_scale_relu.py"
REF_SOURCE = REF.read_text()


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _static(name: str) -> StaticReport:
    return check_files(CANDIDATES / name, REF, "Model")


# --------------------------------------------------------------------------------------------
# static rules on the cheat files


@pytest.mark.parametrize(
    "name, code, line_text",
    [
        ("cheat_copy_pytorch.py", "reuses_reference_op", "torch.relu(x * 2.0"),
        ("cheat_cached_output.py", "cached_output", "return self.cache"),
        ("cheat_calls_reference.py", "calls_reference_forward", "super().forward"),
        ("cheat_timer_patch.py", "timer_tampering", "elapsed_time ="),
        ("cheat_silent_fallback.py", "silent_fallback", "return torch.relu"),
        ("cheat_torch_compile.py", "uses_torch_compile", "torch.compile("),
        ("cheat_no_model_new.py", "no_model_new", None),
        ("cheat_hidden_torch_ops.py", "hides_torch_ops", "aten.mul.Scalar.redispatch"),
        ("cheat_stale_memory.py", "no_custom_kernel", "def forward"),
        # indirect spellings of the reference's op (issue 21)
        ("cheat_getattr_string.py", "reuses_reference_op", 'getattr(torch, "re" + "lu")'),
        ("cheat_aten_ops.py", "reuses_reference_op", "torch.ops.aten.clamp.default"),
        ("cheat_hardtanh_rewrite.py", "reuses_reference_op", "return F.hardtanh("),
        ("cheat_hardtanh_rewrite.py", "no_custom_kernel", "def forward"),
        ("cheat_alias_reexport.py", "reuses_reference_op", '_EPILOGUES["floor"]'),
        ("cheat_copied_declaration.py", "reuses_reference_op", "torch.relu("),
    ],
)
def test_static_rule_rejects_cheat_on_its_line(name, code, line_text):
    report = _static(name)
    assert code in report.codes()
    reason = next(r for r in report.reasons if r.code == code)
    expected_line = _line_of(CANDIDATES / name, line_text) if line_text else None
    assert reason.line == expected_line
    assert reason.message


@pytest.mark.parametrize("name", ["honest_scale_relu.py", "honest_joined_stream.py",
                                  "cheat_partial_output.py", "cheat_mutates_input.py",
                                  "cheat_shape_specialised.py"])
def test_static_rules_pass_files_only_dynamic_checks_can_judge(name):
    assert _static(name).reasons == []


@pytest.mark.parametrize("name", ["cheat_copy_pytorch.py", "cheat_hidden_torch_ops.py",
                                  "cheat_getattr_string.py", "cheat_aten_ops.py",
                                  "cheat_hardtanh_rewrite.py"])
def test_pytorch_only_cheats_compute_the_reference_function(name):
    """A cheat the GPU suite expects to be caught by the profiler must run and give the right
    answer: one that raised instead was rejected as a runtime error, testing nothing (seen on the
    H100 on 2026-11-24 with `mul.Tensor.redispatch` given a Python float)."""
    import importlib.util

    import torch

    def load(path: Path):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    reference = load(REF).Model(8)
    cheat = load(CANDIDATES / name).ModelNew(8)
    cheat.load_state_dict(reference.state_dict())
    x = torch.randn(4, 8)
    torch.testing.assert_close(cheat(x), reference(x))


def test_streams_are_noted_for_the_dynamic_check():
    assert _static("cheat_side_stream.py").uses_streams
    assert _static("honest_joined_stream.py").uses_streams
    assert not _static("honest_scale_relu.py").uses_streams


def test_every_static_code_is_a_stable_rejection_code():
    for path in CANDIDATES.glob("cheat_*.py"):
        assert set(_static(path.name).codes()) <= REJECTION_CODES


def _src(body: str) -> str:
    return textwrap.dedent(body)


@pytest.mark.parametrize(
    "patch, code",
    [
        ("time.perf_counter = lambda: 0.0", "timer_tampering"),
        ("torch.cuda.synchronize = lambda *a: None", "timer_tampering"),
        ("setattr(torch.cuda.Event, 'elapsed_time', lambda s, e: 0.0)", "timer_tampering"),
        ("torch.Tensor.add = lambda a, b: a", "monkeypatches_runtime"),
        ("builtins.print = None", "monkeypatches_runtime"),
        ("sys.modules['torch'] = None", "monkeypatches_runtime"),
    ],
)
def test_monkeypatching_rules(patch, code):
    source = _src(f"""
        import builtins, sys, time
        import torch
        import torch.nn as nn
        {patch}
        class ModelNew(nn.Module):
            def forward(self, x):
                return x
    """)
    report = check_source(source, REF_SOURCE)
    assert code in report.codes()
    assert next(r for r in report.reasons if r.code == code).line == 5


def test_aliased_timer_patch_inside_a_method_is_found():
    source = _src("""
        import time as t
        import torch.nn as nn
        from _ext import ext
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                t.perf_counter = lambda: 0.0
            def forward(self, x):
                return ext.scale_relu(x)
    """)
    assert check_source(source, REF_SOURCE).codes() == ["timer_tampering"]


def test_calling_an_nn_submodule_is_calling_pytorch():
    source = _src("""
        import torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self._inner(x)
            def _inner(self, x):
                return self.fc(x)
    """)
    reason = next(r for r in check_source(source, REF_SOURCE).reasons)
    assert (reason.code, reason.line) == ("calls_reference_forward", 10)


def test_module_level_cache_is_cached_output():
    source = _src("""
        import torch.nn as nn
        _CACHE = None
        class ModelNew(nn.Module):
            def forward(self, x):
                global _CACHE
                if _CACHE is None:
                    _CACHE = kernel(x)
                return _CACHE
    """)
    assert "cached_output" in check_source(source, REF_SOURCE).codes()


def test_an_untrusted_declaration_excuses_nothing():
    source = _src("""
        import torch
        import torch.nn as nn
        from _ext import ext
        KERNELSTITCH_TORCH_OPS = {"aten::relu": "library_call"}
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.relu(ext.scale(x))
    """)
    for origin in CandidateOrigin:  # unbound: not even the built-in origin makes it count
        report = check_source(source, REF_SOURCE, origin=origin)
        assert report.declared_torch_ops == {}
        assert [(r.code, r.line) for r in report.reasons] == [("reuses_reference_op", 8)]
        assert any("KERNELSTITCH_TORCH_OPS ignored" in note for note in report.notes)


def test_layout_ops_shared_with_the_reference_are_allowed():
    reference = _src("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x.view(-1).contiguous()).reshape(x.shape)
    """)
    candidate = _src("""
        import torch
        import torch.nn as nn
        ext = load_inline(name="relu", cpp_sources="", cuda_sources="", functions=["relu"])
        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                return ext.relu(x.view(-1).contiguous(), y).reshape(x.shape)
    """)
    assert check_source(candidate, reference).reasons == []


def test_syntax_error_is_a_compile_error_with_its_line():
    report = check_source("import torch\nclass ModelNew(:\n    pass\n", REF_SOURCE)
    assert report.codes() == ["compile_error"]
    assert report.reasons[0].line == 2


# --------------------------------------------------------------------------------------------
# compiler diagnostics


def _load_inline_cuda_file(candidate_source: str) -> str:
    """What load_inline writes to cuda.cu for the candidate's `cuda_source` literal."""
    namespace: dict = {}
    literal = candidate_source.split('cuda_source = """', 1)[1].split('"""', 1)[0]
    namespace["cuda_source"] = literal
    return "\n".join(["#include <torch/types.h>", "#include <cuda.h>",
                      "#include <cuda_runtime.h>", literal])


def test_nvcc_diagnostic_is_mapped_to_the_candidate_line():
    path = CANDIDATES / "bad_compile_error.py"
    source = path.read_text()
    generated = _load_inline_cuda_file(source)
    gen_line = next(i for i, line in enumerate(generated.splitlines(), 1) if "% cols" in line)
    output = (
        "[1/3] nvcc ... -c /root/.cache/torch_extensions/ks/cuda.cu -o cuda.cuda.o\n"
        "FAILED: cuda.cuda.o\n"
        f'/root/.cache/torch_extensions/ks/cuda.cu({gen_line}): error: identifier "cols" is '
        "undefined\n"
        "1 error detected in the compilation of \"/root/.cache/torch_extensions/ks/cuda.cu\".\n"
    )
    diagnostics = map_diagnostics(output, source,
                                  {"/root/.cache/torch_extensions/ks/cuda.cu": generated})
    assert len(diagnostics) == 1
    assert diagnostics[0].severity == "error"
    assert diagnostics[0].message == 'identifier "cols" is undefined'
    assert diagnostics[0].line == _line_of(path, "b[i % cols]")


def test_gcc_diagnostic_without_the_generated_file_maps_by_line_text():
    source = 'src = """\nint f() {\n    return undefined_name;\n}\n"""\n'
    output = "/tmp/x/main.cpp:7:12: error: 'undefined_name' was not declared in this scope"
    (diag,) = map_diagnostics(output, source, {"/tmp/x/main.cpp": "a\nb\nc\nd\ne\nf\n"
                                               "    return undefined_name;\n"})
    assert diag.line == 3
    assert parse_compiler_output(output)[0][:3] == ("/tmp/x/main.cpp", 7, "error")


# --------------------------------------------------------------------------------------------
# profiler trace reading


def _trace(calls: list[list[tuple]], ops: list[list[tuple[str, float, float]]]):
    """calls[i]: (kernel name, stream[, launching API]) launched inside ks_verify_call_i at
    offset 300 + k; ops[i]: (aten op, start offset, duration) on the CPU inside that call."""
    events, corr = [], 0
    for i, kernels in enumerate(calls):
        t0 = 1000.0 * (i + 1)
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ks_verify_call_{i}",
                       "tid": 1, "ts": t0, "dur": 500.0})
        for name, start, dur in ops[i]:
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "tid": 1,
                           "ts": t0 + start, "dur": dur})
        for k, (kernel, stream, *api) in enumerate(kernels):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime",
                           "name": api[0] if api else "cudaLaunchKernel",
                           "tid": 1, "ts": t0 + 300 + k, "dur": 1.0,
                           "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "tid": 7,
                           "ts": t0 + 400 + k, "dur": 5.0,
                           "args": {"correlation": corr, "stream": stream}})
    return {"traceEvents": events}


def test_trace_summary_finds_own_kernels_per_call():
    trace = _trace(
        [[("scale_relu_kernel(float const*, float const*, float*, long long, long long)", 7)],
         [("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
           7)]],
        [[("aten::empty_like", 10, 5)], [("aten::relu", 10, 50), ("aten::clamp_min", 20, 10)]],
    )
    calls = summarize_trace(trace)
    assert [len(c.own_kernels) for c in calls] == [1, 0]
    assert calls[1].ops == [("aten::relu", ()), ("aten::clamp_min", ("aten::relu",))]


def test_trace_summary_sums_each_kernels_gpu_time_per_call():
    own = "void ks_s3_softmax_row<4>(float const*, float*, long)"
    trace = _trace([[(own, 7), (own, 7), ("void at::native::fill_kernel", 7)], [(own, 7)]],
                   [[], []])
    calls = summarize_trace(trace)
    assert calls[0].kernel_us == {own: 10.0, "void at::native::fill_kernel": 5.0}  # 5 us each
    assert calls[1].kernel_us == {own: 5.0}


def test_the_verdict_carries_each_own_kernels_median_time_over_the_strict_calls():
    from kernelstitch.agents.verifier.assemble import _own_kernel_us

    calls = [{"own_kernel_us": {"ks_a": 10.0, "ks_b": 2.0}}, {"own_kernel_us": {"ks_a": 14.0}},
             {"own_kernel_us": {"ks_a": 99.0}}]  # the third: under the timing settings
    assert _own_kernel_us({"profile": {"calls": calls}}) == {"ks_a": 12.0, "ks_b": 1.0}
    assert _own_kernel_us(None) == {} and _own_kernel_us({}) == {}


def test_library_kernels_count_only_when_the_candidate_launched_them_itself():
    gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_cublas"
    trace = _trace(
        [[(gemm, 7, "cuLaunchKernelEx")],      # its own cuBLASLt call: outside every aten op
         [(gemm, 7)],                          # PyTorch's matmul: inside aten::mm
         [(gemm, 7, "cudaGraphLaunch")],       # a graph replay may hide a PyTorch call
         # Inductor's Triton kernels and PyTorch's own launch outside aten ops too: not libraries
         [("triton_poi_fused_add_clamp_min_mul_0", 7, "cuLaunchKernel"),
          ("void at::native::vectorized_elementwise_kernel<4>", 7)],
         # another library's registered op encloses it like an aten op
         [("flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", 7)]],
        [[("aten::empty", 10, 5)], [("aten::matmul", 250, 100), ("aten::mm", 260, 80)], [], [],
         [("flash_attn::_flash_attn_forward", 250, 100)]],
    )
    calls = summarize_trace(trace)
    assert [c.library_calls for c in calls] == [[gemm], [], [], [], []]
    assert [c.own_kernels for c in calls] == [[], [], [], [], []]
    assert calls[4].ops == []  # only aten ops are matched against the reference's


def test_reuse_rule_respects_declarations_and_their_nested_ops():
    trace = _trace([[("my_kernel", 7)]],
                   [[("aten::linear", 10, 100), ("aten::addmm", 20, 50), ("aten::relu", 200, 5),
                     ("aten::view", 250, 1)]])
    calls = summarize_trace(trace)
    reference = {"aten::linear", "aten::addmm", "aten::relu", "aten::view"}
    assert reused_reference_ops(calls, reference, {}) == ["aten::linear", "aten::addmm",
                                                          "aten::relu"]
    assert reused_reference_ops(calls, reference, {"aten::linear": "library_call"}) == [
        "aten::relu"]


def test_transpose_views_are_not_the_reference_s_work():
    """`A.T` dispatches aten::numpy_T (a permute view) in the reference and in a candidate that
    transposes the same way before its own GEMM: a view, not compute (level1/16-18 were rejected
    for it)."""
    trace = _trace([[("my_gemm", 7)]], [[("aten::numpy_T", 10, 2), ("aten::permute", 11, 1),
                                         ("aten::mT", 20, 2), ("aten::matmul", 30, 50)]])
    calls = summarize_trace(trace)
    reference = {"aten::numpy_T", "aten::permute", "aten::mT", "aten::matmul", "aten::mm"}
    assert reused_reference_ops(calls, reference, {}) == ["aten::matmul"]


@pytest.mark.parametrize("name, own", [
    ("scale_relu_kernel(float const*, float*, long long)", True),
    ("void at::native::elementwise_kernel<128, 2>", False),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", False),
    ("nvjet_tst_128x64_64x8_1x2_h_bz_TNT", False),
    ("triton_poi_fused_add_mul_relu_0", False),
    ("ampere_sgemm_128x64_nn", False),
    # cuDNN's convolution kernels without a library prefix (level2/69's and level3/5's channels-last
    # programs were rejected as "changing their own kernels when timed" over these)
    ("void convolve_common_engine_float_NHWC<float, float, 1024, 5, 5, 3, 3, 3, true, false>", False),
    ("void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>", False),
    ("void fft2d_r2c_16x16<float>(float2*, float const*, int, int, int, int, int, int)", False),
    ("void flip_filter<float, float>(float*, float const*, int, int, int, int)", False),
    ("void implicit_convolveNd_sgemm<float, 3, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, int)", False),
    ("void fft3d_c2r_16x16x16<float>(float*, float2 const*)", False),
    # cuDNN's FFT convolution engine (level3/6's default program was rejected over it, H100, 2026-12-06)
    ("void DSE::regular_fft_pad<0, 1, 256, 16, 16, 1, float, float, float2>(float2*, float*, int, int3)", False),
    ("void DSE::vector_fft<0, 1, 256, 16, 16, 1, float, float, float2>(float2*, float2, int, int3, float2*)", False),
    ("void ks::DSE::tile_kernel(float*)", True),  # only as the name's first identifier
    ("void DSE_like_kernel(float*)", True),
    # only as the name's first identifier: a candidate's kernels named after them stay its own
    ("void my_flip_filter_kernel(float*)", True),
    ("void my_flip_filter<float>(float*)", True),
    ("ks_im2col4d_kernel(float const*, float*)", True),
])
def test_kernel_ownership(name, own):
    assert is_own_kernel(name) is own


# --------------------------------------------------------------------------------------------
# timing statistics


def test_significance_needs_separated_ranges():
    fast = summarize([1.0, 1.01, 1.02, 0.99, 1.0] * 10)
    slow = summarize([2.0, 2.02, 1.98, 2.01, 2.0] * 10)
    noisy = summarize([0.8, 1.6, 1.2, 2.1, 1.0] * 10)
    assert significant(fast, slow)
    assert not significant(fast, noisy)
    timings = build_timings([2.0] * 30, None, [1.0] * 30)
    assert timings.speedup_vs_eager == pytest.approx(2.0)
    assert timings.significant_vs_eager and timings.speedup_vs_compiled is None


# --------------------------------------------------------------------------------------------
# verdict assembly from worker results (synthetic)

SEEDS = [11, 22, 33]


def _ref_result(**extra):
    cases = [{"id": f"s{s}", "seed": s, "shapes": None, "variant": None,
              "input_shapes": [[4096, 4096]]} for s in SEEDS]
    cases.append({"id": "s11_v0", "seed": 11, "shapes": [[4099, 4096]], "variant": 0,
                  "input_shapes": [[4099, 4096]]})
    base = {"cuda": True, "device_name": "NVIDIA H100", "cases": cases,
            "variants": [[[4099, 4096]]], "reference_ops": ["aten::mul", "aten::add",
                                                            "aten::relu"],
            "mutates_inputs": False, "output_aliases_input": False, "nondeterministic": None,
            "notes": [], "timing": {"eager": {"samples_ms": [1.0] * 30,
                                              "unaccounted_ms": [0.005] * 30},
                                    "compiled": {"samples_ms": [0.6] * 30,
                                                 "unaccounted_ms": [0.005] * 30}}}
    base.update(extra)
    return TaskOutcome(base)


def _check(name, seed, failures=()):
    return {"name": name, "case": f"s{seed}", "seed": seed, "shapes": [[4096, 4096]],
            "passed": not failures, "failures": list(failures)}


def _main_result(checks=None, profile=True, timing=None, **extra):
    checks = checks if checks is not None else [
        _check("initial:s11", 11), _check("after_warmup:s22", 22),
        _check("after_warmup:s33", 33), _check("recheck:s11", 11),
        _check("timing_settings:s33", 33)]
    calls = [{"index": i, "kernels": ["scale_relu_kernel"], "own_kernels": ["scale_relu_kernel"],
              "streams": [7], "ops": [["aten::empty_like", []]]} for i in range(2)]
    base = {"phase": "main", "load_failure": None, "checks": checks, "tamper": [],
            "profile": {"calls": calls} if profile else None,
            "timing": timing or {"samples_ms": [0.5] * 30, "unaccounted_ms": [0.005] * 30},
            "fatal": None, "notes": []}
    base.update(extra)
    return TaskOutcome(base)


def _variants_result(failures=()):
    return TaskOutcome({"phase": "variants", "load_failure": None, "tamper": [], "fatal": None,
                        "checks": [{**_check("shape:s11_v0", 11, failures),
                                    "shapes": [[4099, 4096]]}], "notes": []})


def _assemble(static=None, **parts) -> Verdict:
    return assemble(Inputs(static=static or StaticReport(), seeds=SEEDS, **parts))


def test_all_evidence_present_is_accepted_with_timings():
    verdict = _assemble(reference=_ref_result(), main=_main_result(),
                        variants=_variants_result())
    assert verdict.status == "accepted" and verdict.exit_code() == 0
    assert verdict.timings.speedup_vs_eager == pytest.approx(2.0)
    assert verdict.timings.speedup_vs_compiled == pytest.approx(1.2)
    assert verdict.seeds == SEEDS and verdict.device == "NVIDIA H100"
    assert all(c.passed for c in verdict.checks)


def test_the_check_under_the_timing_settings_is_required_when_timed_but_not_under_strict():
    without = [_check("initial:s11", 11), _check("after_warmup:s22", 22),
               _check("after_warmup:s33", 33), _check("recheck:s11", 11)]
    verdict = _assemble(reference=_ref_result(), main=_main_result(without),
                        variants=_variants_result())
    assert verdict.status == "could_not_verify" and "only 4 of 5 checks ran" in verdict.reasons[0].message
    strict = _ref_result()
    strict.result["timing"] = {**strict.result["timing"], "precision": "strict"}
    verdict = _assemble(reference=strict, main=_main_result(without), variants=_variants_result())
    assert verdict.status == "accepted", verdict.reasons  # timed in strict fp32: nothing to add


def test_own_kernels_that_change_under_the_timing_settings_are_rejected():
    """Under PyTorch's defaults an original with convolutions gives the check TF32's bound; a
    program switching its own kernels only then (an fp32 GEMM to a TF32 one) is rejected, while
    the same kernels in both profiles pass (cuDNN kernels, in neither list, may differ)."""
    def call(i, own, library=()):
        return {"index": i, "kernels": [*own, *library, "sm90_xmma_fprop_cudnn"],
                "own_kernels": list(own), "library_calls": list(library), "streams": [7],
                "ops": [["aten::empty_like", []]]}

    same = [call(0, ["gemm_fp32"]), call(1, ["gemm_fp32"]), call(2, ["gemm_fp32"]), call(3, ["gemm_fp32"])]
    main = _main_result()
    main.result["profile"] = {"calls": same}
    verdict = _assemble(reference=_ref_result(), main=main, variants=_variants_result())
    assert verdict.status == "accepted", verdict.reasons
    switched = same[:2] + [call(2, ["gemm_tf32"]), call(3, ["gemm_tf32"])]
    main.result["profile"] = {"calls": switched}
    verdict = _assemble(reference=_ref_result(), main=main, variants=_variants_result())
    assert verdict.codes() == ["behaviour_changes_when_timed"]
    assert "gemm_tf32" in verdict.reasons[0].message
    library = same[:2] + [call(2, ["gemm_fp32"], ["cublasLt_tf32_gemm"]), call(3, ["gemm_fp32"])]
    main.result["profile"] = {"calls": library}
    verdict = _assemble(reference=_ref_result(), main=main, variants=_variants_result())
    assert verdict.codes() == ["behaviour_changes_when_timed"]


def test_missing_profile_is_never_accepted():
    verdict = _assemble(reference=_ref_result(), main=_main_result(profile=False),
                        variants=_variants_result())
    assert verdict.status == "could_not_verify" and verdict.exit_code() == 2


def test_missing_variant_phase_is_never_accepted():
    verdict = _assemble(reference=_ref_result(), main=_main_result())
    assert verdict.status == "could_not_verify"


def test_failure_only_on_other_shapes_is_shape_specialised():
    unwritten = {"code": "unwritten_output", "message": "12288 elements never written",
                 "detail": {}}
    verdict = _assemble(reference=_ref_result(), main=_main_result(),
                        variants=_variants_result([unwritten]))
    assert verdict.codes() == ["shape_specialised"]
    assert verdict.reasons[0].detail["underlying"] == ["unwritten_output"]


def test_variant_worker_crash_after_passing_main_is_shape_specialised():
    verdict = _assemble(reference=_ref_result(), main=_main_result(),
                        variants=TaskOutcome(None, "cuda_fatal", "illegal memory access"))
    assert verdict.codes() == ["shape_specialised"]


def test_unfinished_work_with_streams_is_side_stream_work():
    incomplete = {"code": "incomplete_on_return", "message": "outputs kept changing",
                  "detail": {}}
    checks = [_check("initial:s11", 11, [incomplete]), _check("after_warmup:s22", 22),
              _check("after_warmup:s33", 33), _check("recheck:s11", 11),
              _check("timing_settings:s33", 33)]
    streams = StaticReport(uses_streams=True)
    verdict = _assemble(static=streams, reference=_ref_result(), main=_main_result(checks),
                        variants=_variants_result())
    assert verdict.codes() == ["side_stream_work"]
    verdict = _assemble(reference=_ref_result(), main=_main_result(checks),
                        variants=_variants_result())
    assert verdict.codes() == ["incomplete_on_return"]


def test_work_the_events_do_not_see_is_side_stream_work():
    hidden = {"samples_ms": [0.004] * 30, "unaccounted_ms": [0.045] * 30}
    verdict = _assemble(reference=_ref_result(), main=_main_result(timing=hidden),
                        variants=_variants_result())
    assert verdict.codes() == ["side_stream_work"]


def test_no_own_kernel_and_undeclared_reference_ops_are_rejected():
    main = _main_result()
    main.result["profile"]["calls"][1] = {"index": 1, "kernels": [], "own_kernels": [],
                                          "streams": [], "ops": [["aten::relu", []]]}
    verdict = _assemble(reference=_ref_result(), main=main, variants=_variants_result())
    assert set(verdict.codes()) == {"no_custom_kernel", "reuses_reference_op"}


def test_a_direct_library_call_is_the_candidates_own_work():
    main = _main_result()
    gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_cublas"
    for call in main.result["profile"]["calls"]:
        call.update(kernels=[gemm], own_kernels=[], library_calls=[gemm])
    calls_cublas = StaticReport(library_api_calls=["cublasLtMatmul"])
    verdict = _assemble(static=calls_cublas, reference=_ref_result(), main=main,
                        variants=_variants_result())
    assert verdict.status == "accepted", verdict.reasons
    profile_checks = [c for c in verdict.checks if c.name.startswith("profile:")]
    assert profile_checks and all(c.passed and c.detail["library_calls"] == [gemm]
                                  for c in profile_checks)
    # not when the candidate's source calls no library itself (PyTorch's call, hidden)
    verdict = _assemble(reference=_ref_result(), main=main, variants=_variants_result())
    assert verdict.codes() == ["no_custom_kernel"]
    # nor when the kernel was seen only inside PyTorch's op
    for call in main.result["profile"]["calls"]:
        call.update(library_calls=[])
    verdict = _assemble(static=calls_cublas, reference=_ref_result(), main=main,
                        variants=_variants_result())
    assert verdict.codes() == ["no_custom_kernel"]


_MATMUL_REF = _src("""
    import torch
    import torch.nn as nn
    class Model(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)
""")


@pytest.mark.parametrize("hidden", [
    # Python: the dispatcher's redispatch records no aten op
    "torch.ops.aten.mm.default.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), a, b)",
    # native: the per-backend entry points and record-function guards skip the profiler
    'load_inline("m", cpp_sources=["#include <ATen/ops/mm_cuda_dispatch.h>\\n'
    'at::Tensor f(at::Tensor a, at::Tensor b) { return at::cuda::mm(a, b); }"])(a, b)',
    'load_inline("m", cpp_sources=["at::Tensor f(at::Tensor a, at::Tensor b) { '
    'at::DisableRecordFunctionGuard g; return at::mm(a, b); }"])(a, b)',
    'load_inline("m", cpp_sources=["at::Tensor f(at::Tensor a) { return at::native::relu(a); }"])(a)',
])
def test_torch_ops_hidden_from_the_profiler_are_rejected(hidden):
    source = _src(f"""
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return {hidden}
    """)
    report = check_source(source, _MATMUL_REF)
    assert "hides_torch_ops" in report.codes()
    assert next(r for r in report.reasons if r.code == "hides_torch_ops").line == 7
    assert report.library_api_calls == []


def test_library_api_calls_are_listed_and_stream_helpers_are_fine():
    source = _src("""
        import torch.nn as nn
        CPP = r'''
        at::Tensor f(at::Tensor x) {
          cudaStream_t s = at::cuda::getCurrentCUDAStream();
          cublasLtMatmul(handle, op, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &algo, ws, n, s);
          cudnnConvolutionForward (h, &alpha, xd, x, wd, w, cd, algo, ws, n, &beta, yd, y);
          return x;
        }
        '''
        class ModelNew(nn.Module):
            def forward(self, x):
                return x
    """)
    report = check_source(source, _MATMUL_REF)
    assert report.reasons == []
    assert report.library_api_calls == ["cublasLtMatmul", "cudnnConvolutionForward"]


def test_behaviour_change_and_worker_failures_are_named():
    changed = {"code": "behaviour_changes_after_warmup", "message": "x", "detail": {}}
    checks = [_check("initial:s11", 11), _check("after_warmup:s22", 22),
              _check("after_warmup:s33", 33), _check("recheck:s11", 11, [changed]),
              _check("timing_settings:s33", 33)]
    verdict = _assemble(reference=_ref_result(), main=_main_result(checks),
                        variants=_variants_result())
    assert verdict.codes() == ["behaviour_changes_after_warmup"]
    for kind, code in [("timeout", "timeout"), ("crash", "crashed"), ("cuda_fatal", "crashed")]:
        verdict = _assemble(reference=_ref_result(), main=TaskOutcome(None, kind, "boom"))
        assert verdict.codes() == [code] and verdict.exit_code() == 1


def test_no_gpu_is_could_not_verify_unless_static_rejects():
    no_gpu = TaskOutcome({"cuda": False})
    verdict = _assemble(reference=no_gpu)
    assert (verdict.status, verdict.codes()) == ("could_not_verify", ["no_gpu"])
    static = check_files(CANDIDATES / "cheat_torch_compile.py", REF, "Model")
    verdict = _assemble(static=static, reference=no_gpu)
    assert verdict.status == "rejected"
    assert set(verdict.codes()) == {"uses_torch_compile", "no_custom_kernel"}
    assert any("no CUDA GPU" in n for n in verdict.notes)


def test_reference_failures_are_could_not_verify():
    verdict = _assemble(reference=TaskOutcome(None, "exception", "Model() raised"))
    assert verdict.codes() == ["reference_error"]
    verdict = _assemble(reference=_ref_result(nondeterministic="output 0 differs"))
    assert verdict.codes() == ["reference_nondeterministic"]
    assert set(verdict.codes()) <= COULD_NOT_VERIFY_CODES


# --------------------------------------------------------------------------------------------
# the Verdict type


def test_verdict_json_round_trip_and_markdown():
    verdict = _assemble(reference=_ref_result(), main=_main_result(),
                        variants=_variants_result())
    data = json.loads(json.dumps(verdict.to_json()))
    assert Verdict.from_json(data) == verdict
    text = render_verdict_markdown(verdict)
    assert "**Accepted**" in text and "2.00x" in text and "11, 22, 33" in text
    rejected = _assemble(reference=_ref_result(), main=TaskOutcome(None, "timeout", "slow"))
    assert "`timeout`" in render_verdict_markdown(rejected)


# --------------------------------------------------------------------------------------------
# end to end on this machine (no GPU): verify(), the CLI and the run store

torch = pytest.importorskip("torch")
no_gpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")


@no_gpu_only
def test_verify_without_gpu_is_could_not_verify_and_stored(tmp_path):
    from kernelstitch.agents.verifier import VerifyOptions, verify

    from kernelstitch.core.runstore import RunStore

    store = RunStore(tmp_path / "runs.sqlite")
    verdict = verify(REF, CANDIDATES / "honest_scale_relu.py", options=VerifyOptions(seeds=3),
                     store=store)
    assert verdict.status == "could_not_verify" and verdict.exit_code() == 2
    assert verdict.codes() == ["no_gpu"] and len(set(verdict.seeds)) == 3
    (run,) = store.list_runs(kind="verify")
    assert run.module == "Model" and run.status == "succeeded"
    (artifact,) = store.artifacts(run.id, "verdict")
    assert Verdict.from_json(artifact.content).seeds == verdict.seeds


@no_gpu_only
def test_cli_json_is_one_object_and_exit_codes_follow_the_verdict(capsys):
    from kernelstitch.agents.verifier.cli import verify_command

    code = verify_command(REF, CANDIDATES / "cheat_calls_reference.py", json_output=True,
                          module=None, seeds=2, timing=False)
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["status"] == "rejected"
    assert data["reasons"][0]["code"] == "calls_reference_forward"
    assert data["reasons"][0]["line"] == _line_of(CANDIDATES / "cheat_calls_reference.py",
                                                  "super().forward")
    assert {"checks", "timings", "seeds", "device", "declared_torch_ops"} <= set(data)

    code = verify_command(REF, CANDIDATES / "honest_scale_relu.py", json_output=True,
                          module=None, seeds=2, timing=False)
    assert code == 2 and json.loads(capsys.readouterr().out)["status"] == "could_not_verify"

    code = verify_command(REF, CANDIDATES / "missing.py", json_output=True, module=None,
                          seeds=2, timing=False)
    assert code == 2 and json.loads(capsys.readouterr().out)["status"] == "could_not_verify"


def test_cli_human_summary_names_reasons(capsys):
    from kernelstitch.agents.verifier.cli import verify_command

    code = verify_command(REF, CANDIDATES / "cheat_no_model_new.py", json_output=False,
                          module=None, seeds=2, timing=False)
    out = capsys.readouterr().out
    assert code == 1 and "rejected" in out and "no_model_new" in out


# --------------------------------------------------------------------------------------------
# runtime tamper detection (the candidate worker's snapshot of sensitive attributes)


def test_tamper_snapshot_ignores_torchs_own_lazy_wrapping_and_finds_real_patches():
    import subprocess
    import sys

    script = textwrap.dedent("""
        import time, torch
        from kernelstitch.agents.verifier import tamper
        before = tamper.snapshot()
        import torch._dynamo, torch.profiler   # torch wraps torch.manual_seed on this import
        torch.manual_seed(1)
        assert tamper.changed(before) == [], tamper.changed(before)
        time.perf_counter = lambda: 0.0
        torch.Tensor.clone = lambda self: self
        print(sorted(tamper.changed(before)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert "('monkeypatches_runtime', 'Tensor.clone')" in out
    assert "('timer_tampering', 'time.perf_counter')" in out


def test_settings_left_changed_are_found_and_restored_ones_are_not():
    """A candidate may change a numeric setting inside its forward (the built-in coder's cuDNN
    autotuning) but must restore it: one left changed (cuDNN off, TF32 on) would make the
    original timed after it in the same worker run differently."""
    import subprocess
    import sys

    script = textwrap.dedent("""
        import torch
        from kernelstitch.agents.verifier import tamper
        from kernelstitch.agents.verifier.gpu_common import strict_fp32
        strict_fp32()
        before = {**tamper.snapshot(), **tamper.settings()}
        with torch.backends.cudnn.flags(enabled=True, benchmark=True):  # scoped: restored
            pass
        assert tamper.changed(before) == [], tamper.changed(before)
        torch.backends.cudnn.enabled = False
        torch.backends.cuda.matmul.allow_tf32 = True
        print(sorted(tamper.changed(before)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert "('monkeypatches_runtime', 'torch.backends.cudnn.enabled (a setting)')" in out
    assert "('monkeypatches_runtime', 'torch.backends.cuda.matmul.allow_tf32 (a setting)')" in out


def test_per_op_tf32_settings_left_changed_are_found_and_the_3xtf32_scope_restores_them():
    """torch's per-op precision (`torch.backends.cudnn.conv.fp32_precision = "tf32"`) left on is a
    changed setting even though reading the legacy flag then raises; the built-in coder's
    _CudnnTf32 scope (3xTF32 convolutions) leaves everything as it found it."""
    import subprocess
    import sys

    from kernelstitch.agents.coder.wrapper import CUDNN_TF32

    script = textwrap.dedent("""
        import torch
        from kernelstitch.agents.verifier import tamper
        from kernelstitch.agents.verifier.gpu_common import strict_fp32
        strict_fp32()
        before = {**tamper.snapshot(), **tamper.settings()}
        exec(SCOPE)
        with _CudnnTf32():
            inside = torch._C._get_fp32_precision_getter("cuda", "conv")
        assert inside == "tf32", inside
        assert tamper.changed(before) == [], tamper.changed(before)
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        print(sorted(tamper.changed(before)))
    """).replace("SCOPE", repr(CUDNN_TF32))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert "('monkeypatches_runtime', 'torch.backends.cudnn.conv.fp32_precision (a setting)')" in out


# --------------------------------------------------------------------------------------------
# indirect spellings of a reference op (issue 21): name resolution sees through them


def _kernel_candidate(forward_body: str, prelude: str = "", init: str = "",
                      params: str = "x") -> str:
    """A candidate with a kernel import (so only the op rules can fire) and `y` its output."""
    return _src("""
        import functools, importlib, operator, os
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from _ext import ext
        {prelude}
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                {init}
            def forward(self, {params}):
                y = ext.scale(x)
                return {forward_body}
    """).format(prelude=prelude, init=init or "pass", params=params,
                forward_body=forward_body)


_FORWARD_LINE = 14  # the `return` line of _kernel_candidate


@pytest.mark.parametrize("body, prelude, init", [
    # constant-folded strings
    ('getattr(torch, "re" + "lu")(y)', "", ""),
    ("getattr(torch, f\"{'re'}{'lu'}\")(y)", "", ""),
    ('getattr(torch, "".join(["r", "e", "l", "u"]))(y)', "", ""),
    ('getattr(torch, "%slu" % "re")(y)', "", ""),
    ('getattr(torch, "{}{}".format("re", "lu"))(y)', "", ""),
    ('getattr(torch, "uler"[::-1])(y)', "", ""),
    ('getattr(torch, "RELU".lower())(y)', "", ""),
    ("getattr(F, NAME)(y)", 'NAME = "re" + "lu"', ""),
    ('getattr(torch.nn.functional, "hard" "tanh")(y, 0.0, 1e30)', "", ""),
    # the ATen registry, with and without overloads, in place, aliased
    ("torch.ops.aten.relu(y)", "", ""),
    ("torch.ops.aten.relu_(y)", "", ""),
    ("torch.ops.aten.relu.default(y)", "", ""),
    ("torch.ops.aten.clamp.default(y, 0.0)", "", ""),
    ("ops.clamp_min.default(y, 0.0)", "ops = torch.ops.aten", ""),
    ('getattr(torch.ops.aten, "relu")(y)', "", ""),
    # aliases and re-exports
    ("r(y)", "r = torch.relu", ""),
    ("h(y, 0.0, 1e30)", "from torch.nn.functional import hardtanh as h", ""),
    ("Fn.relu(y)", "import torch.nn.functional as Fn", ""),
    ("torch.clamp_min(y, 0.0)", "", ""),
    ("y.clamp(min=0.0)", "", ""),
    ("y.clamp_(min=0.0)", "", ""),
    ("F.relu6(y)", "", ""),
    ("F.threshold(y, 0.0, 0.0)", "", ""),
    ("torch.Tensor.relu(y)", "", ""),
    ("torch._C._nn.hardtanh(y, 0.0, 1e30)", "", ""),
    ("nn.ReLU()(y)", "", ""),
    ("torch.maximum(y, torch.zeros_like(y))", "", ""),
    # dictionaries, modules, wrappers, runtime lookups of constants
    ('torch.__dict__["relu"](y)', "", ""),
    ('vars(torch)["relu"](y)', "", ""),
    ('importlib.import_module("torch.nn.functional").relu(y)', "", ""),
    ("functools.partial(torch.relu)(y)", "", ""),
    ("list(map(torch.relu, [y]))[0]", "", ""),
    ('operator.methodcaller("relu")(y)', "", ""),
    ('getattr(y, "re" + "lu")()', "", ""),
    ("y.__class__.relu(y)", "", ""),
    ('eval("torch.re" + "lu")(y)', "", ""),
    ("ACTS[0](y)", "ACTS = [torch.relu]", ""),
    # code forward reaches: lambdas, helpers, autograd Functions, attributes set in __init__
    ("act(y)", "act = lambda t: torch.relu(t)", ""),
    ("self.act(y)", "", "self.act = torch.relu"),
    ("self.act(y)", "", 'setattr(self, "act", F.relu)'),
])
def test_indirect_reference_op_is_reuses_reference_op(body, prelude, init):
    report = check_source(_kernel_candidate(body, prelude, init), REF_SOURCE)
    assert "reuses_reference_op" in report.codes(), report.reasons
    assert set(report.codes()) <= REJECTION_CODES


def test_ops_reached_through_helpers_are_found_on_their_line():
    source = _src("""
        import torch
        import torch.nn as nn
        from _ext import ext
        def _epilogue(t):
            return t.clamp_min(0.0)
        class _Relu(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return torch.relu(t)
        class ModelNew(nn.Module):
            def forward(self, x):
                return _Relu.apply(_epilogue(ext.scale(x)))
    """)
    report = check_source(source, REF_SOURCE)
    assert [(r.code, r.line) for r in report.reasons] == [
        ("reuses_reference_op", 6), ("reuses_reference_op", 10)]


@pytest.mark.parametrize("body", [
    "a @ b", "torch.einsum('ij,jk->ik', a, b)", "F.linear(a, b.t())", "a.__matmul__(b)",
    "torch.addmm(torch.zeros(1), a, b)", "torch.ops.aten.mm.default(a, b)",
])
def test_matmul_family_is_one_op(body):
    source = _src(f"""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from _ext import ext
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return ext.epilogue({body})
    """)
    assert check_source(source, _MATMUL_REF).codes() == ["reuses_reference_op"]


@pytest.mark.parametrize("body, prelude, params", [
    ("getattr(torch, name)(y)", "", "x, name='relu'"),
    ("getattr(F, ACT)(y)", 'ACT = os.environ.get("KS_ACT", "relu")', "x"),
    ("getattr(torch.ops.aten, NAME).default(y)",
     'NAME = ""\nfor part in ("re", "lu"):\n    NAME += part', "x"),
    ("getattr(y, method)()", "", "x, method='relu'"),
    ("eval(code)(y)", "", "x, code='torch.relu'"),
])
def test_unresolvable_lookup_on_torch_is_dynamic_torch_lookup(body, prelude, params):
    source = _kernel_candidate(body, prelude, params=params)
    report = check_source(source, REF_SOURCE)
    assert "dynamic_torch_lookup" in report.codes(), report.reasons
    reason = next(r for r in report.reasons if r.code == "dynamic_torch_lookup")
    assert reason.line == next(i for i, line in enumerate(source.splitlines(), 1)
                               if "return" in line and "ext" not in line)
    assert set(report.codes()) <= REJECTION_CODES


@pytest.mark.parametrize("body, prelude, init", [
    ("y", "", ""),
    ("torch.empty_like(y).copy_(y)", "", ""),
    ("y.contiguous().view(-1).reshape(y.shape)", "", ""),
    ("torch.ops.aten.view.default(y, [-1])", "", ""),
    ("y.to(getattr(torch, 'float' + '32'))", "", ""),
    ("getattr(self, 'bias', y)", "", ""),
    ("self.ext.relu(y)", "", "self.ext = ext"),  # an extension function named relu
    ("EXT.relu(y)", "EXT = ext", ""),
    ("y * 2.0 + 1.0", "", ""),
])
def test_honest_spellings_are_not_reuse(body, prelude, init):
    assert check_source(_kernel_candidate(body, prelude, init), REF_SOURCE).reasons == []


def test_no_custom_kernel_needs_a_computing_reference_and_no_kernel_evidence():
    candidate = _src("""
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return x * 2.0
    """)
    identity_ref = _src("""
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return x
    """)
    assert check_source(candidate, REF_SOURCE).codes() == ["no_custom_kernel"]
    assert check_source(candidate, identity_ref).codes() == []
    for evidence in ("import triton", "from . import kernels",
                     "from torch.utils.cpp_extension import load",
                     "SRC = '__global__ void k(float* x) {}'", "import cupy"):
        with_kernel = candidate.replace("import torch.nn as nn",
                                        f"import torch.nn as nn\n{evidence}")
        assert check_source(with_kernel, REF_SOURCE).codes() == [], evidence


@pytest.mark.parametrize("source", [
    # a helper inherited from a same-file base class
    """
    class _Base(nn.Module):
        def _epilogue(self, t):
            return torch.relu(t)
    class ModelNew(_Base):
        def forward(self, x):
            return self._epilogue(ext.scale(x))
    """,
    # __call__ overridden: forward is never what runs
    """
    class ModelNew(nn.Module):
        def forward(self, x):
            return ext.scale(x)
        def __call__(self, x):
            return torch.relu(self.forward(x))
    """,
    # a forward hook registered in __init__ does the reference's work after forward
    """
    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_forward_hook(lambda module, args, out: F.relu(out))
        def forward(self, x):
            return ext.scale(x)
    """,
])
def test_code_that_runs_around_forward_is_seen(source):
    prelude = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" \
              "from _ext import ext\n"
    report = check_source(prelude + _src(source), REF_SOURCE)
    assert report.codes() == ["reuses_reference_op"], report.reasons
