"""Recurrent layers (nn.RNN / nn.LSTM / nn.GRU) captured as one op each.

torch.export keeps `aten.gru.input` as one node, but to learn its output sizes it runs the op's
composite decomposition under fake tensors: one `gru_cell` per time step and layer, each with
symbolic sizes.  At KernelBench sizes (level3/39_GRU: 512 steps, 6 layers; the bidirectional
LSTMs and GRUs) that took minutes, past the capture worker's limit.  During capture, the
`_VF.<rnn>` calls of torch.nn's recurrent modules go through custom ops of the same schema
whose fake implementation states the sizes directly; capture renames their nodes back to the
aten ops (`RECURRENT_OPS`), which the Coder emits as `torch.ops.aten.gru.input(...)` and so on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.modules.rnn as rnn_modules
from kernelstitch.agents.planner.ops import RECURRENT_LIBRARY_OPS
from torch import Tensor

# custom op's capture name -> the aten op it stands for (same schema, same results):
# kernelstitch.gru.default -> aten.gru.input
RECURRENT_OPS = {f"kernelstitch.{op.split('.')[1]}.default": op for op in RECURRENT_LIBRARY_OPS}


def _output_like(input: Tensor, hidden: Tensor, bidirectional: bool) -> Tensor:
    """The sequence output: the input's sizes with features = directions x hidden state size
    (for an LSTM with proj_size, h0's last size is the projection's)."""
    features = hidden.shape[-1] * (2 if bidirectional else 1)
    return input.new_empty((*input.shape[:-1], features))


def _hidden_state_op(name: str):
    """kernelstitch::<name>, the schema of aten.<name>.input with one hidden-state tensor
    (RNN tanh / relu, GRU): (output, h_n)."""
    aten_op = getattr(torch.ops.aten, name).input

    def run(input: Tensor, hx: Tensor, params: list[Tensor], has_biases: bool, num_layers: int,
            dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor]:
        return tuple(aten_op(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                             batch_first))

    def fake(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        return _output_like(input, hx, bidirectional), hx.new_empty(hx.shape)

    op = torch.library.custom_op(f"kernelstitch::{name}", run, mutates_args=())
    op.register_fake(fake)
    return op


_rnn_tanh, _rnn_relu, _gru = (_hidden_state_op(n) for n in ("rnn_tanh", "rnn_relu", "gru"))


@torch.library.custom_op("kernelstitch::lstm", mutates_args=())
def _lstm(input: Tensor, hx: list[Tensor], params: list[Tensor], has_biases: bool, num_layers: int,
          dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
    return tuple(torch.ops.aten.lstm.input(input, hx, params, has_biases, num_layers, dropout, train,
                                           bidirectional, batch_first))


@_lstm.register_fake
def _(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    h0, c0 = hx
    return _output_like(input, h0, bidirectional), h0.new_empty(h0.shape), c0.new_empty(c0.shape)


class _SingleOpVF:
    """torch.nn.modules.rnn's `_VF` with its whole-sequence recurrent calls routed to the custom
    ops; everything else (packed sequences, cells) goes to the real `_VF`."""

    def __init__(self, real) -> None:
        self._real = real
        self._ops = {"rnn_tanh": _rnn_tanh, "rnn_relu": _rnn_relu, "gru": _gru, "lstm": _lstm}

    def __getattr__(self, name: str):
        real = getattr(self._real, name)
        op = self._ops.get(name)
        if op is None:
            return real

        def call(*args):
            # the padded overload: (input, hx, params, has_biases, layers, dropout, train,
            # bidirectional, batch_first); the packed one has batch_sizes second and 8 arguments
            if len(args) == 9 and isinstance(args[2], (list, tuple)):
                hx = list(args[1]) if name == "lstm" else args[1]
                return op(args[0], hx, list(args[2]), *args[3:])
            return real(*args)

        return call


@contextlib.contextmanager
def recurrent_layers_as_single_ops() -> Iterator[None]:
    """While open, torch.nn's RNN / LSTM / GRU modules call the custom ops (capture only)."""
    real = rnn_modules._VF
    rnn_modules._VF = _SingleOpVF(real)
    try:
        yield
    finally:
        rnn_modules._VF = real
