"""Issue 22 (triu / tril): torch.triu / torch.tril planned as triangle kernels with the
elementwise ops before them as a prologue (a GEMM before them keeps its library call), and the
spec's JSON.  Plans and emitted sources on the CPU; tests/test_triangle_gpu.py runs the kernels
and these modules on a GPU against PyTorch."""

from __future__ import annotations

import pytest
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import TriangleSpec, spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen import triangle_specs
from test_norms import _HEADER, write

TRIANGLES = _HEADER + '''
class Model(nn.Module):
    def forward(self, a, b, y):
        return torch.triu(torch.matmul(a, b)), torch.tril(torch.relu(a) * y, diagonal=-1), a.triu(2)

def get_inputs():
    return [torch.randn(2, 33, 33), torch.randn(33, 33), torch.randn(33)]
'''


def _triangles(plan) -> list[TriangleSpec]:
    return [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "triangle"]


@pytest.mark.parametrize("spec", triangle_specs(), ids=lambda s: s.name)
def test_triangle_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


def test_triu_and_tril_plan_as_kernels_with_their_prologue(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, TRIANGLES)))
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    after_gemm, lower, shifted = _triangles(plan)
    assert (after_gemm.kind, after_gemm.diagonal, after_gemm.prologue) == ("triu", 0, ())
    assert (lower.kind, lower.diagonal) == ("tril", -1)
    assert [op.op for op in lower.prologue] == ["relu", "mul"] and len(lower.inputs) == 2
    assert (shifted.kind, shifted.diagonal) == ("triu", 2)


def test_a_one_dim_tensor_is_not_a_triangle(tmp_path):
    source = TRIANGLES.replace("a.triu(2)", "torch.triu(y.unsqueeze(0))")
    assert len(_triangles(plan_builtin(capture(write(tmp_path, source))))) == 3  # 2-d after the view
    cuda = emit(triangle_specs()[0]).binding
    assert "needs at least 2 dims" in cuda


def test_triangle_kernels_are_emitted(tmp_path):
    path = write(tmp_path, TRIANGLES)
    candidate = code_builtin(plan_builtin(capture(path)), path, tmp_path / "model_new.py")
    compile(candidate.source, "model_new.py", "exec")
    specs = {s.name: s for s in triangle_specs()}
    lower = emit(specs["tri_lower_scaled"]).cuda
    assert "col - row <= (int64_t)(-1)" in lower and "ks_load<1>(p1, d1, i, a1)" in lower
    upper = emit(specs["tri_upper_k2_bf16"])
    assert "col - row >= (int64_t)(2)" in upper.cuda and "at::kBFloat16" in upper.binding


@pytest.mark.parametrize("problem, kind", [("14_Matmul_for_upper_triangular_matrices", "triu"),
                                           ("15_Matmul_for_lower_triangular_matrices", "tril")])
def test_kernelbench_triangles_plan_without_fallback(problem, kind):
    from test_norms_gpu import KERNELBENCH

    if KERNELBENCH is None:
        pytest.skip("no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
    plan = plan_builtin(capture(KERNELBENCH / "level1" / f"{problem}.py"))
    assert [s.technique for s in plan.steps] == ["gemm_epilogue", "fused_reduction"]
    assert _triangles(plan)[0].kind == kind


def test_triangle_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """The plan's wiring on the CPU (prologue operands, diagonals, the GEMM's output): every
    kernel replaced by a torch reading of its spec (tests/test_coder.py)."""
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, TRIANGLES)
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
