"""Issue 20 / 22: `x.clone()` / `.detach()` of a fresh value read as the value itself (the
`clone_alias` rewrite), planned and checked on the CPU with the kernels interpreted in torch."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import torch
from kernelstitch.agents.inprocess import generate_builtin
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_program  # noqa: E402

RESIDUAL = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.bias = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        original = x.clone().detach()
        x = x + self.bias
        x = x + original
        return x * original

def get_inputs():
    return [torch.randn(2, 3, 9, 9)]

def get_init_inputs():
    return []
'''

# Not aliased: a copy of an input, a copy returned next to its source, and a graph with an
# in-place op the planner keeps (the copy must see the value before the write).
KEPT = {
    "input": "return x.clone() * 2 + x",
    "output": "y = x * 2\n        return y, y.clone()",
    "inplace": "y = x * 2\n        z = y.clone()\n        y.clamp_(min=0.0)\n        return y + z",
}


def _problem(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_copy_of_a_fresh_value_fuses_with_the_chain_and_matches_the_reference(tmp_path):
    path = _problem(tmp_path, RESIDUAL)
    candidate = generate_builtin(path, "Model", tmp_path / "model_new.py")
    assert [s.technique for s in candidate.plan.steps] == ["library_call", "fused_elementwise"]
    assert any("copy op(s) (clone / detach) read as the value they copy" in n for n in candidate.plan.notes)
    program, reference, new, x = interpreted_program(tmp_path, path, candidate)
    text = program.read_text()
    compute = text[text.index("def _compute"):]  # the wrapper's CUDA-graph replay clones its outputs
    assert "clone" not in compute and "detach" not in compute
    with torch.no_grad():
        torch.testing.assert_close(new(*x), reference(*x), atol=1e-5, rtol=1e-5)


def test_copies_that_could_be_observed_stay(tmp_path):
    for name, body in KEPT.items():
        text = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                "    def forward(self, x):\n        " + body + "\n\n"
                "def get_inputs():\n    return [torch.randn(4, 5)]\n\n"
                "def get_init_inputs():\n    return []\n")
        folder = tmp_path / name
        folder.mkdir()
        plan = plan_builtin(capture(_problem(folder, text)))
        assert not any("clone / detach" in n for n in plan.notes), name
