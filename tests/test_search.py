"""The measured search on the CPU: real planning and coding, recorded timings from a fake GPU
worker, a fake verifier.  What is delivered, what is kept, what is cached."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.variants import propose_variants
from kernelstitch.agents.search import run_search
from kernelstitch.agents.verifier.selection import markdown_table
from kernelstitch.agents.verifier.stats import build_timings
from kernelstitch.agents.verifier.verdict import Reason, Verdict

from kernelstitch.core.runstore import RunStore

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CONV = EXAMPLES / "conv2d_bias_relu.py"


def samples(center: float) -> list[float]:
    return [center * (1 + k / 1000) for k in range(40)]


class FakeGpu:
    """Recorded timings per variant name; counts calls."""

    def __init__(self, times: dict[str, float], original: float = 1.0,
                 original_graph: float | None = None,
                 kernel_ms: dict[str, float] | None = None):
        self.times, self.original, self.measured = times, original, 0
        self.original_graph, self.kernel_ms = original_graph, kernel_ms
        self.rounds: list[list[str]] = []
        self.profiled: list[bool] = []

    def __call__(self, ctx):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def probe(self):
        return "Fake H100", "9.9"

    def measure(self, variants, budget_s, profile=False):
        self.measured += 1
        names = [v["name"] for v in variants]
        self.rounds.append(names)
        self.profiled.append(profile)
        assert all(Path(v["path"]).is_file() for v in variants)
        timed = [n for n in names if n in self.times]
        fastest = min(timed, key=self.times.__getitem__) if timed else None
        found = ({"profile": {"variant": fastest, "kernel_ms": self.kernel_ms}}
                 if profile and self.kernel_ms and fastest else {})
        graphed = ({"samples_ms": samples(self.original_graph)} if self.original_graph
                   else {"error": "run: operation not permitted when stream is capturing"})
        return {"original": samples(self.original), "original_graph": graphed,
                "variants": {n: {"samples_ms": samples(self.times[n])} for n in timed}, **found}


class FakeVerify:
    def __init__(self, verdicts: dict[str, Verdict]):
        self.verdicts, self.calls = verdicts, []

    def __call__(self, path: Path) -> Verdict:
        self.calls.append(path.read_text())
        winner = next(n for n in self.verdicts if f"variant:{n}" in self.calls[-1]
                      or n == "*")
        return self.verdicts[winner]


def accepted(speedup: float) -> Verdict:
    return Verdict(status="accepted", timings=build_timings(samples(1.0), None,
                                                            samples(1.0 / speedup)))


def context(tmp_path):
    config = SimpleNamespace(device=None, verify_timeout_s=60, precision="fp32")
    return SimpleNamespace(source=CONV, module="Model", cancel=threading.Event(), config=config,
                           stages=[], stage=lambda *a, **k: None)


@pytest.fixture(scope="module")
def conv_graph():
    return capture(CONV)


def test_the_planner_proposes_the_uncertain_decisions(conv_graph):
    names = [v.name for v in propose_variants(conv_graph, limit=8)]
    assert names[0] == "default" and set(names) == {"default", "nchw", "graph", "nchw-graph"}


def test_the_fastest_verified_variant_is_delivered_and_the_choice_cached(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 0.9, "nchw": 0.5, "graph": 0.7, "nchw-graph": 1.2})
    verify = FakeVerify({"*": accepted(2.0)})
    found = run_search(context(tmp_path), conv_graph, out, verify, store, 1, worker=gpu)
    assert found.selection.decision == "deliver" and found.selection.winner == "nchw"
    assert found.candidate_path == out / "model_new.py" and found.candidate_path.is_file()
    assert not found.plan.host.channels_last  # the NCHW variant's plan is the one delivered
    assert len(verify.calls) == 1 and verify.calls[0] == found.candidate_path.read_text()
    table = {v.name: v for v in found.selection.variants}
    assert table["nchw-graph"].note == "not faster than the original"

    again = run_search(context(tmp_path), conv_graph, out, verify, store, 2, worker=gpu)
    assert again.selection.reused and again.selection.winner == "nchw"
    assert gpu.measured == 1 and len(verify.calls) == 2  # not re-timed; the winner re-verified


def test_nothing_faster_keeps_the_original_and_offers_nothing(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 1.1, "nchw": 1.3, "graph": 1.05, "nchw-graph": 1.4})
    verify = FakeVerify({"*": accepted(2.0)})
    found = run_search(context(tmp_path), conv_graph, out, verify, store, 1, worker=gpu)
    assert found.selection.decision == "keep_original" and found.candidate_path is None
    # the fastest is verified for the record, then withdrawn: nothing is offered
    assert len(verify.calls) == 1 and "graph" in found.selection.why
    assert not (out / "model_new.py").exists() and not (out / "kernels").exists()
    assert found.verdict is not None and found.verdict.status == "accepted"
    assert "the best, graph" in found.selection.why
    assert (out / "variants" / "default" / "model_new.py").is_file()  # kept for inspection


def test_a_rejected_contender_falls_back_to_the_next(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 0.6, "nchw": 0.5, "graph": 1.5, "nchw-graph": 1.6})
    verdicts = iter([Verdict(status="rejected", reasons=[Reason("wrong_output", "x")]),
                     accepted(1.6)])
    calls = []

    def verify(path):
        calls.append(path)
        return next(verdicts)

    found = run_search(context(tmp_path), conv_graph, out, verify, store, 1, worker=gpu)
    assert found.selection.winner == "default" and len(calls) == 2
    nchw = next(v for v in found.selection.variants if v.name == "nchw")
    assert nchw.verdict == "rejected" and "wrong_output" in nchw.note


def test_a_verified_contender_slower_than_eager_is_not_delivered(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 0.8, "nchw": 1.5, "graph": 1.5, "nchw-graph": 1.5})
    found = run_search(context(tmp_path), conv_graph, out, lambda p: accepted(0.9), store, 1,
                       worker=gpu)
    assert found.selection.decision == "keep_original"
    assert not (out / "model_new.py").exists()


def test_the_two_halves_run_in_different_processes_through_the_manifest(tmp_path, conv_graph):
    """The bench codes variants in its prepare phase and chooses in its measure phase."""
    from kernelstitch.agents.search import BuiltVariants, build_variants, choose_variant

    out = tmp_path / "out"
    built = build_variants(context(tmp_path), conv_graph, out)
    loaded = BuiltVariants.load(out / "variants")
    assert list(loaded.plans) == list(built.plans) and loaded.paths == built.paths
    assert [s.channels_last for s in loaded.plans["nchw"].steps] == \
        [s.channels_last for s in built.plans["nchw"].steps]
    gpu = FakeGpu({"default": 0.9, "nchw": 0.5, "graph": 0.7, "nchw-graph": 1.2})
    found = choose_variant(context(tmp_path), loaded, out, FakeVerify({"*": accepted(2.0)}),
                           RunStore(tmp_path / "runs.sqlite"), 1, worker=gpu)
    assert found.selection.winner == "nchw" and found.candidate_path.is_file()


def test_no_further_contender_is_verified_once_the_time_budget_is_spent(tmp_path, conv_graph):
    from kernelstitch.agents.search import build_variants, choose_variant

    out = tmp_path / "out"
    built = build_variants(context(tmp_path), conv_graph, out)
    gpu = FakeGpu({"default": 0.6, "nchw": 0.5, "graph": 0.7, "nchw-graph": 1.6})
    ticks = iter(range(0, 10_000, 100))  # every clock reading is 100 s later
    calls = []

    def verify(path):
        calls.append(path)
        return Verdict(status="rejected", reasons=[Reason("wrong_output", "x")])

    found = choose_variant(context(tmp_path), built, out, verify,
                           RunStore(tmp_path / "runs.sqlite"), 1, worker=gpu,
                           time_budget_s=50, clock=lambda: next(ticks))
    assert len(calls) == 1  # the fastest contender only
    assert found.selection.decision == "keep_original" and "time budget" in found.selection.why
    assert "(nchw: " in found.selection.why and "wrong_output" in found.selection.why  # why it failed
    notes = {v.name: v.note for v in found.selection.variants}
    assert "were spent" in notes["default"] and "were spent" in notes["graph"]


def test_the_original_under_graph_replay_is_a_baseline_in_the_table(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 0.9, "nchw": 0.5, "graph": 0.7, "nchw-graph": 1.2},
                  original_graph=0.8)
    found = run_search(context(tmp_path), conv_graph, out, FakeVerify({"*": accepted(2.0)}),
                       store, 1, worker=gpu)
    selection = found.selection
    assert selection.winner == "nchw"  # the graphed original is never a contender
    assert selection.original_graph.time_ms.median == pytest.approx(0.8, rel=0.03)
    assert "gains more than launch overhead" in selection.why
    assert "| original-graph | your module, replayed from a CUDA graph" in markdown_table(
        selection)
    again = run_search(context(tmp_path), conv_graph, out, FakeVerify({"*": accepted(2.0)}),
                       store, 2, worker=gpu)
    assert again.selection.reused and again.selection.original_graph == selection.original_graph


def test_a_kept_original_says_when_graph_replay_alone_would_help(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 1.1, "nchw": 1.3, "graph": 1.05, "nchw-graph": 1.4},
                  original_graph=0.7)
    found = run_search(context(tmp_path), conv_graph, out, FakeVerify({"*": accepted(2.0)}),
                       store, 1, worker=gpu)
    assert found.selection.decision == "keep_original"
    assert "(1.43x)" in found.selection.why and "torch.cuda.graphs" in found.selection.why


def test_a_graph_capture_failure_is_reported_not_fatal(tmp_path, conv_graph):
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    gpu = FakeGpu({"default": 0.9, "nchw": 0.5, "graph": 0.7, "nchw-graph": 1.2})
    found = run_search(context(tmp_path), conv_graph, out, FakeVerify({"*": accepted(2.0)}),
                       store, 1, worker=gpu)
    graphed = found.selection.original_graph
    assert graphed.time_ms is None and "capturing" in graphed.error
    assert "capturing" in markdown_table(found.selection)


SOFTMAX = EXAMPLES / "softmax_dim1_3d.py"


def test_the_profile_of_the_fastest_variant_drives_a_second_round(tmp_path):
    graph = capture(SOFTMAX)
    store, out = RunStore(tmp_path / "runs.sqlite"), tmp_path / "out"
    # round 1: `graph` is fastest and its softmax cluster kernel takes 90% of the GPU time
    gpu = FakeGpu({"default": 0.8, "graph": 0.7, "graph-nocluster": 0.5},
                  kernel_ms={"void ks_s1_softmax_cluster<4>(float const*, float*)": 0.9,
                             "void at::native::elementwise_kernel<...>": 0.1})
    ctx = context(tmp_path)
    ctx.source = SOFTMAX
    found = run_search(ctx, graph, out, FakeVerify({"*": accepted(2.0)}), store, 1,
                       worker=gpu)
    assert gpu.rounds == [["default", "graph"], ["default", "graph", "graph-nocluster"]]
    assert gpu.profiled == [True, False]  # only round 1's profile feeds a next round
    selection = found.selection
    assert selection.winner == "graph-nocluster"
    assert not found.plan.steps[0].reduction_knobs.cluster  # the delivered plan has the knob
    row = next(v for v in selection.variants if v.name == "graph-nocluster")
    assert "round 2 (graph's profile: s1 90% of the GPU time)" in row.reason
    assert (out / "variants" / "graph-nocluster" / "model_new.py").is_file()
    # the fast-exp knob changes the row kernels, which did not run: not proposed
    assert not any("fastexp" in v.name for v in selection.variants)


def test_no_second_round_when_no_reduction_dominates(tmp_path):
    graph = capture(SOFTMAX)
    gpu = FakeGpu({"default": 0.8, "graph": 0.7},
                  kernel_ms={"void ks_s1_softmax_cluster<4>(float const*, float*)": 0.1,
                             "void at::native::elementwise_kernel<...>": 0.9})
    ctx = context(tmp_path)
    ctx.source = SOFTMAX
    run_search(ctx, graph, tmp_path / "out", FakeVerify({"*": accepted(2.0)}),
               RunStore(tmp_path / "runs.sqlite"), 1, worker=gpu)
    assert gpu.rounds == [["default", "graph"]]


def test_3d_and_transposed_convolutions_get_a_measured_channels_last_variant(tmp_path):
    """Never a default (no rule ranks them), always a variant: NDHWC for a 3-D transposed
    convolution, read by the fused kernel in that layout."""
    source = tmp_path / "convt3d.py"
    source.write_text(CONV_T3D)
    graph = capture(source)
    variants = {v.name: v for v in propose_variants(graph, limit=8)}
    assert "ndhwc" in variants and not variants["default"].plan.host.channels_last
    from kernelstitch.agents.coder.builtin import code_builtin

    text = code_builtin(variants["ndhwc"].plan, source, tmp_path / "model_new.py").source
    assert "_KS.ks_layout_swap(v_x, True)" in text  # NCDHW -> NDHWC, our tiled copy
    # the fused elementwise kernel reads the NDHWC output through its tiles: no copy back
    assert "ks_layout_swap(v_conv_transpose3d_nobias, False)" not in text
    # both layouts' programs carry the same extension (one build for the search's variants)
    nd = code_builtin(variants["ndhwc"].plan, source, tmp_path / "nd.py")
    default = code_builtin(variants["default"].plan, source, tmp_path / "default.py")
    assert "_KS.ks_layout_swap" not in default.source
    assert [k.cuda for k in default.kernels] == [k.cuda for k in nd.kernels]
    assert "ks_layout_swap" in {k.function for k in default.kernels}


CONV_T3D = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(4, 8, 3, stride=2)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 2.0


def get_inputs():
    return [torch.randn(2, 4, 6, 6, 6)]


def get_init_inputs():
    return []
'''


def test_library_kernels_that_dominate_a_conv_plan_get_cudnn_autotuning_in_round_2(tmp_path, conv_graph):
    """The fastest variant's GPU time is mostly cuDNN's: round 2 times it again with cuDNN
    choosing its algorithms by timing them (cudnn.benchmark during forward), and delivers that
    only as a measured winner."""
    gpu = FakeGpu({"default": 0.8, "autotune": 0.5},
                  kernel_ms={"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw": 0.8,
                             "void ks_s1_relu_vec<4>(float const*, float*)": 0.2})
    found = run_search(context(tmp_path), conv_graph, tmp_path / "out", FakeVerify({"*": accepted(2.0)}),
                       RunStore(tmp_path / "runs.sqlite"), 1, worker=gpu)
    assert len(gpu.rounds) == 2 and "autotune" in gpu.rounds[1] and "autotune" not in gpu.rounds[0]
    assert found.selection.winner == "autotune" and found.plan.host.cudnn_benchmark
    row = next(v for v in found.selection.variants if v.name == "autotune")
    assert "library kernels 80%" in row.reason and "cudnn.benchmark" in row.reason
    program = (tmp_path / "out" / "variants" / "autotune" / "model_new.py").read_text()
    assert "class _CudnnAutotune" in program and "        with _CudnnAutotune():\n" in program
    default = (tmp_path / "out" / "variants" / "default" / "model_new.py").read_text()
    assert "_CudnnAutotune" not in default  # the other programs' forward enters no context


def test_a_round_2_winner_is_reused_by_the_next_generate(tmp_path, conv_graph):
    """Round 1 does not build a round-2 variant: the cache keeps the delivered plan, and the
    next search codes it again from there instead of measuring everything again (an H100 run of
    test_search_gpu found the autotuned winner of conv2d_bias_relu re-measured every time)."""
    store, verify = RunStore(tmp_path / "runs.sqlite"), FakeVerify({"*": accepted(2.0)})
    gpu = FakeGpu({"default": 0.8, "autotune": 0.5},
                  kernel_ms={"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw": 0.8})
    first = run_search(context(tmp_path), conv_graph, tmp_path / "out", verify, store, 1, worker=gpu)
    assert first.selection.winner == "autotune" and gpu.measured == 2
    shutil.rmtree(tmp_path / "out")  # a fresh output folder: only the store remembers
    again = run_search(context(tmp_path), conv_graph, tmp_path / "out", verify, store, 2, worker=gpu)
    assert again.selection.reused and again.selection.winner == "autotune"
    assert gpu.measured == 2 and again.plan.host.cudnn_benchmark  # not re-timed
    assert "with _CudnnAutotune():" in again.candidate_path.read_text()


def test_our_own_kernels_dominating_a_conv_plan_get_no_autotune_variant(tmp_path, conv_graph):
    gpu = FakeGpu({"default": 0.8},
                  kernel_ms={"sm90_xmma_fprop_implicit_gemm": 0.1, "void ks_s1_relu_vec<4>(float const*, float*)": 0.9})
    run_search(context(tmp_path), conv_graph, tmp_path / "out", FakeVerify({"*": accepted(2.0)}),
               RunStore(tmp_path / "runs.sqlite"), 1, worker=gpu)
    assert not any("autotune" in n for r in gpu.rounds for n in r)


def test_cudnn_autotune_is_scoped_to_forward_and_round_trips_in_the_plan():
    """The program's context manager restores the caller's cudnn.benchmark (on the CPU: the
    flag only), whatever it was; the host setting survives the plan's JSON."""
    import torch
    from kernelstitch.agents.coder.wrapper import CUDNN_AUTOTUNE
    from kernelstitch.agents.plan import Plan
    from kernelstitch.agents.planner.variants import PlanVariant, autotune_variant

    scope: dict = {"torch": torch}
    exec(CUDNN_AUTOTUNE, scope)
    before = torch.backends.cudnn.benchmark
    seen = []
    for caller in (False, True):
        torch.backends.cudnn.benchmark = caller
        with scope["_CudnnAutotune"]():
            seen.append(torch.backends.cudnn.benchmark)
        seen.append(torch.backends.cudnn.benchmark)
    torch.backends.cudnn.benchmark = before
    assert seen == [True, False, True, True]

    plan = propose_variants(capture(CONV), limit=1)[0].plan
    tuned = autotune_variant(PlanVariant("default", "", plan))
    assert tuned is not None and tuned.name == "autotune"
    again = Plan.from_json(tuned.plan.to_json())
    assert again.host.cudnn_benchmark and not plan.host.cudnn_benchmark
    assert autotune_variant(tuned) is None  # already on


GEMM_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({k}, {n})

    def forward(self, x):
        return torch.relu(self.fc(x)) * 0.5


def get_inputs():
    return [torch.randn({m}, {k})]


def get_init_inputs():
    return []
'''


def _gemm_graph(tmp_path, m: int, k: int, n: int):
    source = tmp_path / f"gemm_{m}_{k}_{n}.py"
    source.write_text(GEMM_SOURCE.format(m=m, k=k, n=n))
    return source, capture(source)


def test_fp32_gemms_get_a_3xtf32_variant_ranked_by_the_cost_model(tmp_path):
    """Compute-bound (M 1024, K = N = 8192): 3xTF32 ranks first among the alternatives; weight-bound
    (M 128, K = N = 16384: the splitting pass rewrites 2 GiB of weights per call) it ranks last."""
    from kernelstitch.agents.plan.kernel_spec import GemmSpec

    _, graph = _gemm_graph(tmp_path, 1024, 8192, 8192)
    variants = propose_variants(graph, limit=8)
    names = [v.name for v in variants]
    assert names[:2] == ["default", "3xtf32"], names
    split = variants[1].plan
    specs = [s.kernel_spec() for s in split.steps if s.technique == "gemm_epilogue"]
    assert specs and all(isinstance(g, GemmSpec) and g.split_tf32 for g in specs)
    assert not any((s.spec or {}).get("split_tf32") for s in variants[0].plan.steps)
    _, wide = _gemm_graph(tmp_path, 128, 16384, 16384)
    names = [v.name for v in propose_variants(wide, limit=8)]
    assert "3xtf32" in names and names[-1] == "3xtf32", names


def test_a_precision_opt_in_supersedes_3xtf32(tmp_path):
    """Under tf32 the 3xTF32 variant is the default plan again: built once, not twice."""
    from kernelstitch.agents.search import build_variants

    source, graph = _gemm_graph(tmp_path, 1024, 8192, 8192)
    ctx = context(tmp_path)
    ctx.source = source
    strict = build_variants(ctx, graph, tmp_path / "strict")
    assert "3xtf32" in strict.paths
    assert "ks_gemm_split_tf32(x2" in strict.paths["3xtf32"].read_text()  # model_new.py holds the binding
    assert "ks_gemm_split_tf32(x2" not in strict.paths["default"].read_text()
    ctx.config.precision = "tf32"
    reduced = build_variants(ctx, graph, tmp_path / "tf32")
    assert "3xtf32" not in reduced.paths and "default" in reduced.paths
    # the pipeline's own way: the base plan already under the opt-in
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.planner.precision import with_precision

    based = build_variants(ctx, graph, tmp_path / "tf32b", base=with_precision(plan_builtin(graph), "tf32"))
    assert "3xtf32" not in based.paths and "default" in based.paths


CONVT_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose3d(8, 16, 3, stride=2, groups={groups})
        self.conv = nn.Conv2d(4, 4, 3)

    def forward(self, x, y):
        return torch.relu(self.up(x)) * 2.0, self.conv(y)


def get_inputs():
    return [torch.randn(2, 8, 6, 6, 6), torch.randn(2, 4, 9, 9)]


def get_init_inputs():
    return []
'''


def test_transposed_convolutions_get_a_3xtf32_variant_first_among_the_alternatives(tmp_path):
    """Under precision strict (the user's convolutions run in fp32) only the transposed
    convolution is split (ordinary ones were never faster as 3xTF32): our kernel lays the split
    operands side by side, one convolution runs with cuDNN's TF32 allowed for that call only.
    Under PyTorch's defaults (precision fp32: the original's convolution is one TF32 pass already),
    groups > 1 and a precision opt-in get no such variant."""
    from kernelstitch.agents.coder.builtin import code_builtin
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.planner.precision import with_precision
    from kernelstitch.agents.search import build_variants

    source = tmp_path / "convt.py"
    source.write_text(CONVT_SOURCE.format(groups=1))
    graph = capture(source)
    assert "conv3xtf32" not in [v.name for v in propose_variants(graph, limit=None)]
    strict = with_precision(plan_builtin(graph), "strict")
    assert strict.host.precision == "strict" and any("TF32 off" in r for r in strict.host.reasons)
    variants = propose_variants(graph, limit=4, default=strict)
    assert [v.name for v in variants][:2] == ["default", "conv3xtf32"]
    split = variants[1].plan
    flagged = [s for s in split.steps if (s.spec or {}).get("split_tf32")]
    assert [split.graph.node(s.nodes[0]).op for s in flagged] == ["aten.conv_transpose3d.input"]
    text = code_builtin(split, source, tmp_path / "model_new.py").source
    assert text.count("_KS.ks_split_cat_tf32(") == 2 and "with _CudnnTf32():" in text
    assert "torch._C._set_cudnn_allow_tf32(self._before)" in text  # the caller's setting restored
    assert "torch.ops.aten.conv2d.default(_KS.ks_layout_swap(v_y, True)" in text  # the ordinary convolution as it was
    default_text = code_builtin(variants[0].plan, source, tmp_path / "default.py").source
    assert "ks_split_cat_tf32" not in default_text and "_CudnnTf32" not in default_text

    ctx = context(tmp_path)
    ctx.source = source
    ctx.config.precision = "tf32"
    reduced = build_variants(ctx, graph, tmp_path / "tf32", limit=4)
    assert "conv3xtf32" not in reduced.paths and len(reduced.paths) == 4  # the slot went to another
    based = build_variants(ctx, graph, tmp_path / "tf32b", limit=4,
                           base=with_precision(plan_builtin(graph), "tf32"))
    assert "conv3xtf32" not in based.paths

    grouped = tmp_path / "convt_grouped.py"
    grouped.write_text(CONVT_SOURCE.format(groups=2))
    grouped_graph = capture(grouped)
    assert "conv3xtf32" not in [v.name for v in propose_variants(
        grouped_graph, limit=8, default=with_precision(plan_builtin(grouped_graph), "strict"))]


CONV_BN_RELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return []
'''


def _bn_search(tmp_path, stats_ms: float):
    """The search over CONV_BN_RELU (training mode) with round 1's fastest variant `default`
    spending `stats_ms` of 1 ms in its batch-statistics kernel."""
    source = tmp_path / "conv_bn_relu.py"
    source.write_text(CONV_BN_RELU)
    graph = capture(source)
    (stats,) = [s.spec["name"] for s in propose_variants(graph, limit=1)[0].plan.steps
                if (s.spec or {}).get("type") == "batch_stats"]
    gpu = FakeGpu({"default": 0.8, "nchw": 0.9, "bn-in-pytorch": 0.5},
                  kernel_ms={f"void {stats}_partial<false, false>(float const*, float*)": stats_ms,
                             "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw": 1.0 - stats_ms})
    ctx = context(tmp_path)
    ctx.source = source
    found = run_search(ctx, graph, tmp_path / "out", FakeVerify({"*": accepted(2.0)}),
                       RunStore(tmp_path / "runs.sqlite"), 1, worker=gpu)
    return gpu, found


def test_batch_norms_that_dominate_the_profile_get_pytorchs_batch_norm_in_round_2(tmp_path):
    """Round 1's fastest program spends half its GPU time in our batch statistics: round 2 times
    the same program with PyTorch's batch_norm (cuDNN) in their place, same host settings
    (CUDA graph, layout), and delivers it only as a measured winner."""
    gpu, found = _bn_search(tmp_path, 0.5)
    assert len(gpu.rounds) == 2 and "bn-in-pytorch" in gpu.rounds[1] and "bn-in-pytorch" not in gpu.rounds[0]
    assert found.selection.winner == "bn-in-pytorch"
    row = next(v for v in found.selection.variants if v.name == "bn-in-pytorch")
    assert "batch norms 50%" in row.reason and "cuDNN" in row.reason
    plan = found.plan
    assert not any((s.spec or {}).get("type") == "batch_stats" for s in plan.steps)
    assert [s.technique for s in plan.steps if "batch_norm" in s.nodes] == ["pytorch_fallback"]
    default = next(v for v in propose_variants(capture(tmp_path / "conv_bn_relu.py"), limit=1))
    assert plan.host.cuda_graph == default.plan.host.cuda_graph  # the fastest variant's decisions
    assert plan.host.channels_last == default.plan.host.channels_last


def test_no_pytorch_batch_norm_variant_when_our_batch_norms_are_cheap(tmp_path):
    gpu, found = _bn_search(tmp_path, 0.05)
    assert not any("bn-in-pytorch" in name for names in gpu.rounds for name in names)
    assert found.selection.winner == "default"


def test_pytorch_batch_norm_keeps_a_cuda_graph_and_eval_mode_has_no_variant(tmp_path):
    from dataclasses import replace

    from kernelstitch.agents.planner.variants import PlanVariant, batch_norm_in_pytorch

    source = tmp_path / "conv_bn_relu.py"
    source.write_text(CONV_BN_RELU)
    graph = capture(source)
    base = propose_variants(graph, limit=1)[0]
    graphed = PlanVariant("nchw-graph", base.reason, replace(base.plan, host=replace(
        base.plan.host, cuda_graph=True, channels_last=False)))
    variant = batch_norm_in_pytorch(graphed, graph)
    assert variant.name == "nchw-graph-bn-in-pytorch" and variant.plan.host.cuda_graph
    assert not variant.plan.host.channels_last and not any(s.channels_last for s in variant.plan.steps)
    # eval mode: batch_norm is elementwise on the running statistics, no statistics kernel
    evaluated = tmp_path / "eval.py"
    evaluated.write_text(CONV_BN_RELU.replace("self.bn = nn.BatchNorm2d(8)", "self.bn = nn.BatchNorm2d(8).eval()"))
    eval_graph = capture(evaluated)
    assert batch_norm_in_pytorch(propose_variants(eval_graph, limit=1)[0], eval_graph) is None
