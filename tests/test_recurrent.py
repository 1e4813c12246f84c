"""Recurrent layers captured as one op each (agents/planner/recurrent.py): a long, deep GRU is
one `aten.gru.input` node (export used to trace a cell per time step and layer: minutes), and
the generated programs of RNN / GRU / LSTM modules compute what the modules compute."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.verifier.declaration import CandidateOrigin
from kernelstitch.agents.verifier.static_checks import check_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = {layer}
        self.head = nn.Linear({features}, 4)

    def forward(self, x, h0):
        out, _ = self.rnn(x, h0)
        return self.head(out)

def get_inputs():
    return [torch.randn({x_shape}), {h0}]

def get_init_inputs():
    return []
'''


def _problem(layer: str, features: int, x_shape: str, h0: str) -> str:
    return textwrap.dedent(PROBLEM.format(layer=layer, features=features, x_shape=x_shape, h0=h0))


def lstm_problem(layer: str, features: int, x_shape: str, states: str) -> str:
    """PROBLEM for an LSTM, which takes (h0, c0): `states` is the source of their tuple."""
    return _problem(layer, features, x_shape, f"*{states}").replace(
        "def forward(self, x, h0):", "def forward(self, x, h0, c0):").replace("self.rnn(x, h0)", "self.rnn(x, (h0, c0))")


def test_a_long_deep_gru_is_captured_as_one_op(tmp_path):
    """512 steps x 6 layers x 2 directions (level3/41_GRUBidirectional's sizes)."""
    path = tmp_path / "gru.py"
    path.write_text(_problem("nn.GRU(128, 256, 6, bidirectional=True)", 512, "512, 10, 128",
                             "torch.randn(12, 10, 256)"))
    ops = [n.op for n in capture(path).nodes if n.op != "placeholder"]
    assert ops.count("aten.gru.input") == 1
    assert not [op for op in ops if "cell" in op or op.startswith("kernelstitch.")], ops


CASES = {
    "rnn_tanh": ("nn.RNN(6, 8, 2)", 8, "5, 3, 6", "torch.randn(2, 3, 8)", "aten.rnn_tanh.input"),
    "rnn_relu_batch_first": ("nn.RNN(6, 8, 1, nonlinearity='relu', batch_first=True)", 8, "3, 5, 6",
                             "torch.randn(1, 3, 8)", "aten.rnn_relu.input"),
    "gru_bidirectional": ("nn.GRU(6, 8, 2, bidirectional=True)", 16, "5, 3, 6", "torch.randn(4, 3, 8)",
                          "aten.gru.input"),
    "lstm_proj": ("nn.LSTM(6, 8, 2, batch_first=True, proj_size=5)", 5, "3, 5, 6",
                  "(torch.randn(2, 3, 5), torch.randn(2, 3, 8))", "aten.lstm.input"),
}


@pytest.mark.parametrize("name", CASES)
def test_recurrent_programs_match_their_modules(name, tmp_path):
    layer, features, x_shape, h0, op = CASES[name]
    text = (lstm_problem if name == "lstm_proj" else _problem)(layer, features, x_shape, h0)
    candidate, reference, new, inputs = interpreted_problem(tmp_path, text)
    assert f"torch.ops.{op}(" in candidate.source
    step = next(s for s in candidate.plan.steps if s.nodes and (s.spec or {}).get("op") == op)
    assert step.technique == "library_call" and "cuDNN" in step.description  # not a fallback
    # the Verifier's static rules accept the call (declared with its cuDNN op)
    assert check_files(tmp_path / "model_new.py", tmp_path / "problem.py", origin=CandidateOrigin.BUILTIN).reasons == []
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-5, rtol=1e-5)


VANILLA_RNN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.randn((4, 6))  # a tensor attribute, neither parameter nor buffer
        self.i2h = nn.Linear(5 + 6, 6)
        self.h2o = nn.Linear(6, 3)

    def forward(self, x, initial_hidden):
        self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = torch.tanh(self.i2h(combined))
        return self.h2o(self.hidden)

def get_inputs():
    return [torch.randn(4, 5), torch.randn(4, 6)]

def get_init_inputs():
    return []
'''


def test_a_tensor_attribute_that_forward_overwrites_needs_no_contents(tmp_path):
    """level3/33_VanillaRNN: `self.hidden` (made in __init__, random) is overwritten by copy_
    before forward reads it, so the program reads the copied input instead of a constant whose
    contents capture cannot see."""
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(VANILLA_RNN))
    graph = capture(tmp_path / "problem.py")  # the file interpreted_problem wrote
    assert not [n for n in graph.placeholders() if n.placeholder.kind == "constant"]
    assert not [n.op for n in graph.nodes if "copy" in n.op]
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-5, rtol=1e-5)
