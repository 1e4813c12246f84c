"""The contraction emitter on the CPU (its GPU behaviour: tests/test_contraction_gpu.py): what the
emitted kernel and binding hold for Mamba2's two einsums, a bmm, a GEMV and four operands; the
spec checks; the CPU interpretation; every tile with 1-4 operands through ptxas, no spills."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from kernelstitch.agents.coder.codegen import (
    ContractionSpec,
    TensorArg,
    build_extension_sources,
    emit,
)
from kernelstitch.agents.coder.codegen.contraction import HEADER, THREAD_OUTPUTS, emit_contraction
from kernelstitch.agents.coder.codegen.templates import define
from kernelstitch.agents.plan.kernel_spec import (
    CONTRACTION_MAX_DIMS,
    CONTRACTION_MAX_INPUTS,
    CONTRACTION_TILES,
    spec_from_json,
    spec_to_json,
)
from spill_scope import NO_SPILLS, nvcc_report, ptxas_kernels
from test_codegen import contraction_specs

f32 = lambda n, d="float32": TensorArg(n, d)  # noqa: E731
SPECS = {s.name: s for s in contraction_specs()}


def test_the_kernel_limits_are_the_specs():
    assert define(HEADER, "KS_CONTRACTION_MAX_INPUTS") == CONTRACTION_MAX_INPUTS
    assert define(HEADER, "KS_CONTRACTION_MAX_DIMS") == CONTRACTION_MAX_DIMS
    assert set(THREAD_OUTPUTS) == set(CONTRACTION_TILES)
    for (bm, bn), (rm, rn) in THREAD_OUTPUTS.items():
        assert (bm // rm) * (bn // rn) == 256 and bm % rm == 0 and bn % rn == 0


def test_mamba2_chunk_states():
    """einsum("bclhn,bhcl,bclhp->bchpn", B, decay, X): side A = {X} (m = p), side B = {B, decay}
    (n = n; decay lacks n: stride 0 there, from the binding's tables)."""
    k = emit(SPECS["ctr_mamba_states"])
    assert k.function == "ctr_mamba_states" and k.python_args == ("B", "decay", "X")
    assert "constexpr int BM = 64, BN = 64, BK = KS_CONTRACTION_BK;" in k.cuda
    assert "constexpr int RM = 4, RN = 4;" in k.cuda
    assert "constexpr int NB = 3, NM = 1, NN = 1, NK = 1;" in k.cuda and "constexpr int NIN = 3;" in k.cuda
    assert "constexpr bool M_FAST = false;" in k.cuda  # the output's last index n: threads along n
    assert "av[r] = 1.0f * ks_ld(p2 + off[2] + koff[buf][2][kk]);" in k.cuda  # side A: X
    assert "bv[r] = 1.0f * ks_ld(p0 + off[0] + koff[buf][0][kk]) * ks_ld(p1 + off[1] + koff[buf][1][kk]);" in k.cuda
    assert "__launch_bounds__(256)" in k.cuda and "ks_fastdiv_apply" in k.cuda
    assert "ks_from_float<float>(acc[i][j])" in k.cuda
    # letters b c l h n p: batch b c h (dims 0 1 2), k l, n n, m p
    assert 'static const char letters[] = "bclhnp";' in k.binding
    assert "static const int role_of[NL] = {0, 0, 3, 0, 2, 1};" in k.binding
    assert "static const int dim_of[NL] = {0, 1, 0, 2, 0, 0};" in k.binding
    assert "static const int in_letters[NIN][5] = {{0, 1, 2, 3, 4}, {0, 3, 1, 2}, {0, 1, 2, 3, 5}};" in k.binding
    assert "static const int out_letters[NOUT > 0 ? NOUT : 1] = {0, 1, 3, 5, 4};" in k.binding
    assert 'ks_check_tensor(in_1, "ctr_mamba_states: input 1 (decay)", at::kFloat, device);' in k.binding
    assert "at::empty(out_shape, in_0.options().dtype(at::kFloat))" in k.binding
    assert k.launcher_decl.startswith("struct KsContraction;\n")  # defined in the binding's header
    assert "side A: X" in k.notes[0] and "side B: B, decay" in k.notes[0]


def test_mamba2_state_passing_has_an_empty_m():
    k = emit(SPECS["ctr_mamba_passing"])  # einsum("bhc,bchpn->bhpn", w, S): m = ""
    assert "constexpr int BM = 1, BN = 256" in k.cuda and "constexpr int RM = 1, RN = 1;" in k.cuda
    assert "constexpr int NB = 2, NM = 0, NN = 2, NK = 1;" in k.cuda
    assert "av[r] = 1.0f * ks_ld(p0 + off[0] + koff[buf][0][kk]);" in k.cuda
    assert "bv[r] = 1.0f * ks_ld(p1 + off[1] + koff[buf][1][kk]);" in k.cuda
    assert "static const int role_of[NL] = {0, 0, 3, 2, 2};" in k.binding  # b h c p n


def test_bmm_gemv_and_a_single_operand():
    bmm = emit(SPECS["ctr_bmm"])
    assert "constexpr int BM = 64, BN = 16" in bmm.cuda and "constexpr int RM = 4, RN = 1;" in bmm.cuda
    assert "constexpr int NB = 1, NM = 1, NN = 1, NK = 1;" in bmm.cuda
    gemv = emit(SPECS["ctr_gemv"])  # "ij,j->i": n empty, the output's last index is m
    assert "constexpr int NB = 0, NM = 1, NN = 0, NK = 1;" in gemv.cuda
    assert "constexpr bool M_FAST = true;" in gemv.cuda and "constexpr int BM = 256, BN = 1" in gemv.cuda
    one = emit(SPECS["ctr_sum"])  # "bij->bi": side B has no operand, its product is 1
    assert "bv[r] = 1.0f;" in one.cuda and one.python_args == ("a",)


def test_four_operands_of_three_dtypes():
    k = emit(SPECS["ctr_four_f16"])
    assert ("const __half* __restrict__ p0, const float* __restrict__ p1, const __nv_bfloat16* __restrict__ p2, "
            "const float* __restrict__ p3, __nv_bfloat16* __restrict__ out") in k.cuda
    assert "ks_from_float<__nv_bfloat16>(acc[i][j])" in k.cuda
    assert "static_cast<const __half*>(ins[0])" in k.cuda
    assert 'ks_check_tensor(in_0, "ctr_four_f16: input 0 (a)", at::kHalf, device);' in k.binding
    assert 'ks_check_tensor(in_2, "ctr_four_f16: input 2 (c)", at::kBFloat16, device);' in k.binding
    assert "at::empty(out_shape, in_0.options().dtype(at::kBFloat16))" in k.binding
    assert "constexpr int NB = 1, NM = 1, NN = 2, NK = 2;" in k.cuda


def test_empty_output_indices_and_the_json_round_trip():
    dot = ContractionSpec("ctr_dot", (f32("x"), f32("y")), "i,i->", (0, 1), "", "", "", "i", "float32", (1, 256))
    k = emit(dot)
    assert "constexpr int NB = 0, NM = 0, NN = 0, NK = 1;" in k.cuda
    assert "static const int out_letters[NOUT > 0 ? NOUT : 1] = {0};" in k.binding and "NOUT = 0;" in k.binding
    for spec in [*SPECS.values(), dot]:
        again = spec_from_json(spec_to_json(spec))
        assert again == spec and emit(again).cuda == emit(spec).cuda


def test_several_contractions_share_one_extension():
    kernels = [emit(s) for s in SPECS.values()]
    cpp, cuda, names = build_extension_sources(kernels)
    assert names == list(SPECS)
    assert cpp.index("struct KsContraction;") < cpp.index("void ctr_bmm_launch(") < cpp.index("struct KsContraction {")
    assert cuda.count("#ifndef KS_CONTRACTION_H") == len(kernels)  # guarded: defined once a unit


BAD = [
    (dict(inputs=()), "0 inputs"),
    (dict(inputs=(f32("a"),) * 5, sides=(0,) * 5, equation="i,i,i,i,i->i"), "5 inputs"),
    (dict(inputs=(f32("a"), TensorArg("b", "int64"))), "int64"),
    (dict(out_dtype="bool"), "output dtype bool"),
    (dict(tile=(32, 32)), r"tile \(32, 32\)"),
    (dict(sides=(0,)), "1 sides"),
    (dict(sides=(0, 2)), "sides"),
    (dict(equation="bij,bjk"), "explicit"),
    (dict(equation="bij,bjk->bik->b"), "explicit"),
    (dict(equation="bi1,bjk->bik"), "letters only"),
    (dict(equation="bii,bjk->bik"), "repeated"),
    (dict(equation="bij,bjk->bikz"), "in no input"),
    (dict(n=""), "split the output"),
    (dict(batch="bi", m="i"), "split the output"),
    (dict(m="k", n="i"), "side A's operands only"),  # i is side A's: it cannot be n
    (dict(sides=(1, 0)), "side A's operands only"),
    (dict(k=""), "summed indices"),
    (dict(batch="b", m="i", n="k", k="jj"), "summed indices"),
    (dict(equation="bcij,bcjk->bcik", batch="cb"), "subsequence"),
    (dict(name="not a name"), "identifier"),
    (dict(equation="acdefij,ajk->acdefik", batch="acdef"), "more than 4"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_specs_are_refused(change, message):
    base = dict(name="c", inputs=(f32("a"), f32("b")), equation="bij,bjk->bik", sides=(0, 1), batch="b", m="i",
                n="k", k="j", out_dtype="float32", tile=(64, 64))
    with pytest.raises(ValueError, match=message):
        emit_contraction(ContractionSpec(**{**base, **change}))


def test_the_cpu_interpretation_is_torch_einsum():
    torch = pytest.importorskip("torch")
    from test_coder import interpret

    spec = spec_to_json(SPECS["ctr_four_f16"])
    a, b = torch.randn(2, 3, 4, 5).half(), torch.randn(3, 4, 5)
    c, d = torch.randn(4, 5, 6).bfloat16(), torch.randn(5, 6, 7)
    got = interpret(spec)(a, b, c, d)
    want = torch.einsum("abcd,bcd,cde,def->abef", a.float(), b, c.float(), d)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 6, 7)
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


# ---- nvcc: every tile with 1..4 operands, no spills -------------------------------------------

def nvcc_specs() -> list[ContractionSpec]:
    """Each tile with 1, 2, 3 and 4 operands (the 4-operand ones: 4 dims in three roles, mixed
    dtypes), Mamba2's chunk states among the 3-operand ones."""
    specs = []
    for bm, bn in CONTRACTION_TILES:
        t = f"{bm}x{bn}"
        specs += [
            ContractionSpec(f"one_{t}", (f32("a"),), "bij->bi", (0,), "b", "i", "", "j", "float32", (bm, bn)),
            ContractionSpec(f"bmm_{t}", (f32("a"), f32("b")), "bij,bjk->bik", (0, 1), "b", "i", "k", "j",
                            "float16", (bm, bn)),
            ContractionSpec(f"mamba_{t}", (f32("B"), f32("decay"), f32("X")), "bclhn,bhcl,bclhp->bchpn", (1, 1, 0),
                            "bch", "p", "n", "l", "float32", (bm, bn)),
            ContractionSpec(f"four_{t}", (f32("a", "float16"), f32("b"), f32("c", "bfloat16"), f32("d")),
                            "wxyzabcd,abcd,cdeh,defh->wxyzbef", (0, 0, 1, 1), "wxyz", "b", "ef", "acdh",
                            "bfloat16", (bm, bn)),
        ]
    return specs


@pytest.mark.nvcc
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_tile_and_operand_count_compiles_without_spills():
    """ptxas -v for sm_90a at -O3 (nvcc 13.0, 2026-12-07): the pipelined k loop (the next step's
    values in registers) within the 64-register bound at every tile and operand count, no
    stack."""
    specs = nvcc_specs()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "contraction.cu"
        path.write_text("\n".join(emit_contraction(s).cuda for s in specs))
        flags = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-Xptxas", "-v", "-cubin", "-o", "/dev/null"]
        rc, log = nvcc_report(flags, path, timeout_s=800)  # tests/spill_scope.py: cached by text
    assert rc == 0, log[-4000:]
    report = ptxas_kernels(log)
    assert sorted(report) == sorted(s.name for s in specs), report
    problems = {k: v for k, v in report.items() if v[1] != NO_SPILLS
                or v[0] > 128}  # 256 threads: 2 blocks an SM at least
    assert not problems, problems
    print("\n".join(f"{k}: {r} registers" for k, (r, _) in sorted(report.items())))
