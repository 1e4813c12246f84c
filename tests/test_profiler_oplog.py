"""The op recorder ties each torch call to the user's source line (runs on CPU)."""

from __future__ import annotations

import pytest
from test_profiler_support import FIXTURES

torch = pytest.importorskip("torch")


def test_recorder_lines_modules_and_versioned_ids():
    from kernelstitch.profiler.oplog import make_recorder

    from kernelstitch.core.problem import load_problem

    path = FIXTURES / "problem_small.py"
    problem = load_problem(path)
    model = problem.build().float()
    (x,) = [t.float()[:64] for t in problem.inputs()]
    recorder = make_recorder(str(path.resolve()), {id(m): n for n, m in model.named_modules()})
    with recorder, torch.no_grad():
        model(x)
    ops = {o.line: o for o in recorder.ops if o.line}
    assert [ops[line].func for line in (13, 14, 15, 16, 17)] == [
        "linear", "Tensor.mul", "Tensor.add", "relu", "softmax"]  # fmt: skip
    assert ops[13].module == "linear" and ops[14].module == ""  # submodule call vs own line
    assert ops[13].inputs[0].shape == [64, 1024] and ops[13].outputs[0].dtype == "fp32"
    for producer, consumer in ((13, 14), (14, 15), (15, 16), (16, 17)):
        assert ops[consumer].inputs[0].id == ops[producer].outputs[0].id
    ids = [o.outputs[0].id for o in ops.values()]
    assert len(set(ids)) == len(ids)  # reused allocator blocks still give distinct ids
