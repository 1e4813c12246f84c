"""The persistent recurrent kernel on a GPU: the emitted kernels (tests/test_codegen.py's
recurrent specs, one load_inline) against torch's nn.LSTM / nn.GRU / nn.RNN in strict fp32 over
odd sizes (hidden and input sizes no multiple of anything, one step, batches of several passes),
bidirectional, batch_first, no biases; and the recurrent variant of a module verified end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from test_codegen import recurrent_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

# spec name -> (torch module class, keyword arguments a module of its kind takes)
MODULES = {
    "rnn_lstm6": (torch.nn.LSTM, dict(num_layers=6)),
    "rnn_gru6_bi": (torch.nn.GRU, dict(num_layers=6, bidirectional=True)),
    "rnn_tanh_t16": (torch.nn.RNN, dict(num_layers=2, bias=False, batch_first=True)),
    "rnn_relu_t1_bi": (torch.nn.RNN, dict(num_layers=1, nonlinearity="relu", bidirectional=True)),
    "rnn_lstm_t16_bi": (torch.nn.LSTM, dict(num_layers=2, bidirectional=True)),
}
# (steps, batch, input features, hidden): one step; odd sizes; batches over the tile (several
# passes a step); KernelBench's layer (hidden 256, input 128)
SIZES = [(1, 3, 5, 7), (9, 23, 19, 37), (33, 2, 64, 130), (64, 10, 128, 256)]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_recurrent_gpu_tests", recurrent_specs())


def _strict_fp32():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


@pytest.mark.parametrize("sizes", SIZES, ids=str)
@pytest.mark.parametrize("name", MODULES)
def test_the_kernel_matches_torch(ext, name, sizes):
    _strict_fp32()
    steps, batch, features, hidden = sizes
    cls, kwargs = MODULES[name]
    torch.manual_seed(steps * 1000 + batch)
    module = cls(features, hidden, **kwargs).cuda()
    chains = kwargs["num_layers"] * (2 if kwargs.get("bidirectional") else 1)
    shape = (batch, steps, features) if kwargs.get("batch_first") else (steps, batch, features)
    x = torch.randn(*shape, device="cuda")
    h0 = torch.randn(chains, batch, hidden, device="cuda")
    lstm = cls is torch.nn.LSTM
    c0 = torch.randn(chains, batch, hidden, device="cuda") if lstm else None
    with torch.no_grad():
        want = module(x, (h0, c0)) if lstm else module(x, h0)
        got = getattr(ext, name)(x, [h0, c0] if lstm else [h0], list(module._flat_weights))
    want_flat = [want[0], *(want[1] if lstm else (want[1],))]
    assert len(got) == len(want_flat)
    for g, w in zip(got, want_flat):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=2e-4, rtol=2e-4)


def test_a_misaligned_strided_input_and_states(ext):
    """A transposed (non-contiguous) input and states sliced from a larger tensor."""
    _strict_fp32()
    module = torch.nn.LSTM(19, 37, num_layers=6).cuda()
    x = torch.randn(25, 7, 19, device="cuda").transpose(0, 1)[:, 1:]  # [T=7, B=24, 19], not contiguous
    states = torch.randn(2, 6, 24, 38, device="cuda")[..., 1:]
    h0, c0 = states[0], states[1]
    with torch.no_grad():
        y, (h, c) = module(x, (h0.contiguous(), c0.contiguous()))  # (cuDNN refuses strided states)
        got = ext.rnn_lstm6(x, [h0, c0], list(module._flat_weights))
    for g, w in zip(got, (y, h, c)):
        torch.testing.assert_close(g, w, atol=2e-4, rtol=2e-4)


def test_wrong_weights_are_refused_with_a_message(ext):
    module = torch.nn.GRU(5, 8, num_layers=6, bidirectional=True).cuda()
    x, h0 = torch.randn(3, 2, 5, device="cuda"), torch.randn(12, 2, 8, device="cuda")
    with pytest.raises(RuntimeError, match="weight tensors"):
        ext.rnn_gru6_bi(x, [h0], list(module._flat_weights)[:-1])
    with pytest.raises(RuntimeError, match="h0 of shape"):
        ext.rnn_gru6_bi(x, [h0[:6]], list(module._flat_weights))


GRU_PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(40, 96, 3)

    def forward(self, x, h0):
        out, h = self.gru(x, h0)
        return out, h

def get_inputs():
    return [torch.randn(50, 6, 40), torch.randn(3, 6, 96)]

def get_init_inputs():
    return []
'''


def test_the_recurrent_variant_of_a_module_is_accepted_by_the_verifier(tmp_path):
    from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
    from kernelstitch.agents.planner.capture import capture
    from kernelstitch.agents.planner.variants import propose_variants
    from kernelstitch.agents.verifier import verify
    from kernelstitch.agents.verifier.declaration import CandidateOrigin
    from test_norms_gpu import QUICK

    path = tmp_path / "problem.py"
    path.write_text(GRU_PROBLEM)
    variant = next(v for v in propose_variants(capture(path), None) if v.name == "recurrent-kernel")
    candidate = Path(write_candidate(code_builtin(variant.plan, path, tmp_path / "out" / "model_new.py"),
                                     tmp_path / "out"))
    verdict = verify(path, candidate, options=QUICK, origin=CandidateOrigin.BUILTIN)
    print(verdict.status, [(r.code, r.detail) for r in verdict.reasons])
    assert verdict.status == "accepted", verdict.reasons
