"""The persistent recurrent kernel as a plan variant (agents/planner/recurrent_kernel.py,
codegen/recurrent.py): which recurrent layers it takes, the program around it, and on the CPU
the kernel's math (tests/test_coder.py: recurrent_reference, step by step as its blocks compute)
against torch's modules.  tests/test_recurrent_gpu.py runs the CUDA kernel itself."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import (
    RecurrentSpec,
    TensorArg,
    spec_from_json,
    spec_to_json,
)
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.variants import propose_variants
from kernelstitch.agents.verifier.declaration import CandidateOrigin
from kernelstitch.agents.verifier.static_checks import check_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_program  # noqa: E402
from test_recurrent import lstm_problem  # noqa: E402

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = {layer}

    def forward(self, x, {states}):
        {body}

def get_inputs():
    return [torch.randn({x_shape}), {state_values}]

def get_init_inputs():
    return []
'''


def _problem(layer: str, x_shape: str, chains: int, batch: int, hidden: int, lstm: bool) -> str:
    state = f"torch.randn({chains}, {batch}, {hidden})"
    return textwrap.dedent(PROBLEM.format(
        layer=layer, x_shape=x_shape, states="h0, c0" if lstm else "h0",
        body="out, (h, c) = self.rnn(x, (h0, c0))\n        return out, h, c" if lstm else "return self.rnn(x, h0)",
        state_values=f"{state}, {state}" if lstm else state))


# layer, input shape, chains (layers x directions), batch, hidden
CASES = {
    "lstm_two_layers_batch_first": ("nn.LSTM(6, 8, 2, batch_first=True)", "3, 5, 6", 2, 3, 8),
    "lstm_bidirectional": ("nn.LSTM(5, 7, 2, bidirectional=True)", "4, 3, 5", 4, 3, 7),
    "gru_three_layers": ("nn.GRU(6, 9, 3)", "6, 2, 6", 3, 2, 9),
    "gru_bidirectional_batch_first": ("nn.GRU(4, 6, 2, bidirectional=True, batch_first=True)", "3, 5, 4", 4, 3, 6),
    "rnn_tanh_without_biases": ("nn.RNN(5, 8, 2, bias=False)", "4, 3, 5", 2, 3, 8),
    "rnn_relu_bidirectional": ("nn.RNN(5, 6, 1, nonlinearity='relu', bidirectional=True)", "4, 2, 5", 2, 2, 6),
}


def _recurrent_variant(path: Path):
    variants = {v.name: v for v in propose_variants(capture(path), None)}
    return variants.get("recurrent-kernel")


@pytest.mark.parametrize("name", CASES)
def test_the_recurrent_variant_computes_what_the_module_computes(name, tmp_path):
    layer, x_shape, chains, batch, hidden = CASES[name]
    lstm = "LSTM" in layer
    path = tmp_path / "problem.py"
    path.write_text(_problem(layer, x_shape, chains, batch, hidden, lstm))
    variant = _recurrent_variant(path)
    assert variant is not None
    step = next(s for s in variant.plan.steps if s.technique == "fused_recurrent")
    assert step.spec["type"] == "recurrent" and step.spec["cell"] in name
    candidate = code_builtin(variant.plan, path, tmp_path / "model_new.py")
    program, reference, new, inputs = interpreted_program(tmp_path, path, candidate)
    # (input, [h0(, c0)], [weights]): aten's argument structure
    assert f"_KS.{step.spec['name']}(v_x, [v_h0{', v_c0' if lstm else ''}], [" in candidate.source
    assert check_files(program, path, origin=CandidateOrigin.BUILTIN).reasons == []
    with torch.no_grad():
        want, got = reference(*inputs), new(*inputs)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)  # output, h_n (and c_n): nested tuples


def test_the_default_plan_keeps_cudnn_and_the_kernel_is_a_variant(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(_problem("nn.GRU(128, 256, 6)", "512, 10, 128", 6, 10, 256, False))
    variants = propose_variants(capture(path), 4)
    assert variants[0].name == "default"
    assert [s.technique for s in variants[0].plan.steps] == ["library_call"]
    assert variants[1].name == "recurrent-kernel"  # first among the alternatives: the roofline cannot rank it
    spec = spec_from_json(variants[1].plan.steps[0].spec)
    assert (spec.cell, spec.layers, spec.directions, spec.batch_tile) == ("gru", 6, 1, 10)
    assert "wavefront" in variants[1].plan.steps[0].description


def test_the_recurrent_variant_is_built_on_top_of_the_limit(tmp_path):
    """The recurrent kernel takes no other alternative's place, in the planner's proposals and in
    the variants the search builds: level3/38's 3xtf32 plan, delivered at 22.2 ms, had been pushed
    out of the search's four variants by it."""
    from types import SimpleNamespace

    from kernelstitch.agents.search import build_variants

    path = tmp_path / "problem.py"
    path.write_text(lstm_problem("nn.LSTM(32, 64, 2, batch_first=True, bidirectional=True)", 128, "4, 16, 32",
                                 "(torch.randn(4, 4, 64), torch.randn(4, 4, 64))"))  # an LSTM, then a Linear
    graph = capture(path)
    every = [v.name for v in propose_variants(graph, None)]
    assert every[:2] == ["default", "recurrent-kernel"] and len(every) == 5 and "3xtf32" in every
    assert [v.name for v in propose_variants(graph, 3)] == every[:4]  # the default, 2 ranked, the kernel
    assert [v.name for v in propose_variants(graph, 1)] == every[:2]
    ctx = SimpleNamespace(source=path, module="Model", config=SimpleNamespace(precision="fp32"),
                          stage=lambda *a, **k: None)
    built = build_variants(ctx, graph, tmp_path / "out", limit=4)  # the search's default limit
    assert sorted(built.plans) == sorted(every) and "3xtf32" in built.paths


LEFT_TO_CUDNN = {
    # dropout between layers in training mode draws random numbers
    "training_dropout": ("nn.LSTM(6, 8, 2, dropout=0.5)", "3, 2, 6", 2, 2, 8),
    # a projection (proj_size) has a fifth weight a chain
    "projection": ("nn.LSTM(6, 8, 2, proj_size=4)", "3, 2, 6", 2, 2, 8),
    # one layer of hidden 8192 does not fit the GPU's shared memory at once
    "too_wide": ("nn.RNN(16, 8192, 1)", "2, 2, 16", 1, 2, 8192),
}


@pytest.mark.parametrize("name", LEFT_TO_CUDNN)
def test_layers_the_kernel_cannot_run_stay_with_cudnn(name, tmp_path):
    layer, x_shape, chains, batch, hidden = LEFT_TO_CUDNN[name]
    path = tmp_path / "problem.py"
    text = _problem(layer, x_shape, chains, batch, hidden, "LSTM" in layer)
    if name == "projection":  # h0 has the projection's size
        text = text.replace("torch.randn(2, 2, 8), torch.randn(2, 2, 8)", "torch.randn(2, 2, 4), torch.randn(2, 2, 8)")
    path.write_text(text)
    assert _recurrent_variant(path) is None


def _spec(**more) -> RecurrentSpec:
    f = lambda n: TensorArg(n, "float32")  # noqa: E731
    fields = dict(name="ks_s1_lstm", cell="lstm", input=f("x"), hidden=f("h0"), layers=2, directions=2,
                  has_biases=True, batch_first=True, batch_tile=10, cell_state=f("c0"),
                  weights=tuple(f(f"w{k}") for k in range(16)))
    fields.update(more)
    return RecurrentSpec(**fields)


def test_the_spec_round_trips_and_the_call_groups_its_arguments():
    spec = _spec()
    assert spec_from_json(spec_to_json(spec)) == spec
    source = emit(spec)
    assert source.python_args[:3] == ("x", "h0", "c0") and len(source.python_args) == 19
    names = [f"v{k}" for k in range(19)]
    assert source.call_arguments(names) == "v0, [v1, v2], [" + ", ".join(names[3:]) + "]"
    assert "std::tuple<at::Tensor, at::Tensor, at::Tensor>" in source.binding
    gru = emit(_spec(name="ks_s2_gru", cell="gru", cell_state=None))
    assert gru.call_arguments(names[:1] + names[2:]) == "v0, [v2], [" + ", ".join(names[3:]) + "]"
    assert "std::make_tuple(y, hn)" in gru.binding


@pytest.mark.parametrize("change, message", [
    ({"weights": ()}, "weight tensors"),
    ({"cell_state": None}, "cell state"),
    ({"batch_tile": 17}, "batch tile"),
    ({"cell": "lstm2"}, "unknown recurrent cell"),
    ({"input": TensorArg("x", "float16")}, "float32"),
])
def test_the_emitter_refuses_specs_the_kernel_cannot_run(change, message):
    with pytest.raises(ValueError, match=message):
        emit(_spec(**change))


def test_the_reduce_scatter_leaves_each_lane_its_own_block_of_sums():
    """kernel.cu's reduce-scatter, lane by lane in numpy: after the 5 levels lane L holds the
    32-lane sums of indices [L * M, L * M + M) (the index map its rows_dot stores by)."""
    rng = np.random.default_rng(0)
    for n in (32, 96, 128):
        values = rng.standard_normal((32, n))
        held, count, offset = values.copy(), n, 16
        while offset >= 1:
            half, nxt = count // 2, held.copy()
            for lane in range(32):
                up, partner = bool(lane & offset), lane ^ offset
                for i in range(half):
                    keep = held[lane, i + half] if up else held[lane, i]
                    sent = held[partner, i] if bool(partner & offset) else held[partner, i + half]
                    nxt[lane, i] = keep + sent
            held, count, offset = nxt, half, offset // 2
        m = n // 32
        got = np.array([held[lane, i] for lane in range(32) for i in range(m)])
        np.testing.assert_allclose(got, values.sum(0), rtol=1e-12, atol=1e-12)
