"""Issue 22 (reductions returning indices): torch.argmax / torch.argmin planned as arg-reduce
kernels with the elementwise ops before them as a prologue, over a dim or every element, and
the spec's JSON.  Plans and emitted sources on the CPU; tests/test_arg_reduce_gpu.py runs the
kernels and these modules on a GPU against PyTorch."""

from __future__ import annotations

import pytest
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import ArgReduceSpec, spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen import arg_reduce_specs
from test_norms import _HEADER, write

ARGS = _HEADER + '''
class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, y):
        fused = torch.argmax(torch.relu(x) * y, dim=self.dim)
        return fused, torch.argmin(x, dim=-1, keepdim=True), torch.argmax(x), x.argmin(0)

def get_inputs():
    return [torch.randn(8, 33, 5), torch.randn(33, 1)]

def get_init_inputs():
    return [1]
'''


def _arg_reduces(plan) -> list[ArgReduceSpec]:
    return [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "arg_reduce"]


@pytest.mark.parametrize("spec", arg_reduce_specs(), ids=lambda s: s.name)
def test_arg_reduce_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


def test_argmax_and_argmin_plan_as_kernels_with_their_prologue(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, ARGS)))
    assert [s.technique for s in plan.steps] == ["fused_reduction"] * 4
    fused, keep, flat, first = _arg_reduces(plan)
    assert (fused.kind, fused.dim, fused.keepdim) == ("argmax", 1, False)
    assert [op.op for op in fused.prologue] == ["relu", "mul"] and len(fused.inputs) == 2
    assert (keep.kind, keep.dim, keep.keepdim, keep.prologue) == ("argmin", -1, True, ())
    assert (flat.kind, flat.dim) == ("argmax", None)
    assert (first.kind, first.dim) == ("argmin", 0)


def test_an_integer_tensor_keeps_argmax_in_pytorch(tmp_path):
    source = ARGS.replace("return fused, torch.argmin(x, dim=-1, keepdim=True), torch.argmax(x), x.argmin(0)",
                          "return fused, torch.argmax(x.long(), dim=0)")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert len(_arg_reduces(plan)) == 1
    fallbacks = [s for s in plan.steps if s.technique == "pytorch_fallback"]
    assert any("argmax" in " ".join(s.nodes) or "argmax" in s.description for s in fallbacks)


def test_arg_reduce_kernels_are_emitted(tmp_path):
    path = write(tmp_path, ARGS)
    candidate = code_builtin(plan_builtin(capture(path)), path, tmp_path / "model_new.py")
    compile(candidate.source, "model_new.py", "exec")
    cuda = "\n".join(k.cuda for k in candidate.kernels)
    assert cuda.count("_rows(") >= 4 and cuda.count("_cols(") >= 4
    specs = {s.name: s for s in arg_reduce_specs()}
    flat = emit(specs["arg_max_all"])
    assert "int64_t dim" not in flat.binding and "v > b" in flat.cuda
    keep = emit(specs["arg_min_f16_keep"])
    assert "v < b" in keep.cuda and "else if (true) out_shape.push_back(1);" in keep.binding
    assert "at::kHalf" in keep.binding and "at::kLong" in keep.binding


@pytest.mark.parametrize("problem, kind", [("51_Argmax_over_a_dimension", "argmax"),
                                           ("52_Argmin_over_a_dimension", "argmin")])
def test_kernelbench_arg_reduces_plan_without_fallback(problem, kind):
    from test_norms_gpu import KERNELBENCH

    if KERNELBENCH is None:
        pytest.skip("no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
    plan = plan_builtin(capture(KERNELBENCH / "level1" / f"{problem}.py"))
    assert [s.technique for s in plan.steps] == ["fused_reduction"]
    assert _arg_reduces(plan)[0].kind == kind


def test_arg_reduce_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """The plan's wiring on the CPU (prologue operands, dims, keepdim, int64 outputs): every
    kernel replaced by a torch reading of its spec (tests/test_coder.py)."""
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, ARGS)
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs)):
            assert got.dtype == want.dtype == torch.int64
            assert torch.equal(got, want)
