"""Recurrent emitter (cuda/recurrent/): an nn.LSTM / nn.GRU / nn.RNN stack as the persistent
recurrent kernel.  Python fixes what the module fixes (cell, layers, directions, batch_first,
biases) and the batch tile; the binding reads the sizes at run time and decides how many layers
a launch holds on the GPU it runs on."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import check_identifier
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    RECURRENT_CELLS,
    RECURRENT_GATES,
    RECURRENT_MAX_BATCH,
    RECURRENT_MAX_BATCH_TILE,
    RecurrentSpec,
)

_WHAT = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN (tanh)", "rnn_relu": "RNN (relu)"}
MAX_CHAINS = 16  # (layer, direction) chains a launch: the chain table is a kernel parameter


def _chains_struct(name: str) -> str:
    """The launch's chain table, declared alike in the kernel's and the binding's unit."""
    return f"""struct {name}_chain {{  // one (layer, direction) of a launch
  const float* x;  // the layer's input: (t, b, k) at x[t * xs_t + b * xs_b + k]
  int64_t xs_t, xs_b;
  int in;  // input features
  const float* w_ih;  // [gates * H, in]
  const float* w_hh;  // [gates * H, H]
  const float* b_ih;  // [gates * H] or null (no biases)
  const float* b_hh;
  const float* h0;  // [B, H]
  const float* c0;  // [B, H] (LSTM) or null
  float* y;  // the layer's output, this direction's columns: (t, b, j) at y[t * ys_t + b * ys_b + j]
  int64_t ys_t, ys_b;
  float* hn;  // [B, H]
  float* cn;  // [B, H] (LSTM) or null
  int reverse, first_block, blocks;
  int dep[2];  // chains of this launch whose output at t this chain reads (-1: none)
}};
struct {name}_chains {{
  {name}_chain chain[{MAX_CHAINS}];
  int count;
}};"""


def emit_recurrent(spec: RecurrentSpec) -> KernelSource:
    name = check_identifier(spec.name)
    if spec.cell not in RECURRENT_CELLS:
        raise ValueError(f"{name}: unknown recurrent cell {spec.cell!r}")
    if spec.directions not in (1, 2) or spec.layers < 1:
        raise ValueError(f"{name}: {spec.layers} layers x {spec.directions} directions")
    if not 1 <= spec.batch_tile <= RECURRENT_MAX_BATCH_TILE:
        raise ValueError(f"{name}: batch tile {spec.batch_tile} outside 1..{RECURRENT_MAX_BATCH_TILE}")
    lstm = spec.cell == "lstm"
    if lstm != (spec.cell_state is not None):
        raise ValueError(f"{name}: an LSTM, and only an LSTM, reads a cell state")
    per_chain = 4 if spec.has_biases else 2
    if len(spec.weights) != spec.layers * spec.directions * per_chain:
        raise ValueError(f"{name}: {len(spec.weights)} weight tensors for {spec.layers} layers x "
                         f"{spec.directions} directions x {per_chain}")
    tensors = (spec.input, spec.hidden, *((spec.cell_state,) if lstm else ()), *spec.weights)
    if any(t.dtype != "float32" for t in tensors):
        raise ValueError(f"{name}: the recurrent kernel runs float32 tensors only")
    what = f"{spec.layers}-layer {'bidirectional ' if spec.directions == 2 else ''}{_WHAT[spec.cell]}"
    struct = _chains_struct(name)
    launcher_sig = (f"int {name}_launch(const {name}_chains& chains, int blocks, int B, int T, int H, int U, "
                    "int in_max, unsigned* counters, cudaStream_t stream)")
    helpers = (f"size_t {name}_smem_bytes(int U, int in_max, int H, int B);\n"
               f"int {name}_max_units();\nint {name}_blocks_per_sm(size_t smem);")
    cuda = render("recurrent/kernel.cu", name=name, what=what, cell=RECURRENT_CELLS.index(spec.cell),
                  batch_tile=spec.batch_tile, chains_struct=struct, launcher_sig=launcher_sig)
    outputs = 3 if lstm else 2
    binding = render(
        "recurrent/binding.cpp", name=name, what=what, op=spec.cell, layers=spec.layers, dirs=spec.directions,
        per_chain=per_chain, gates=RECURRENT_GATES[spec.cell], batch_first="true" if spec.batch_first else "false",
        lstm="true" if lstm else "false", max_batch=RECURRENT_MAX_BATCH, max_chains=MAX_CHAINS,
        ret_type=f"std::tuple<{', '.join(['at::Tensor'] * outputs)}>",
        ret_expr="std::make_tuple(y, hn, cn)" if lstm else "std::make_tuple(y, hn)")
    hx_count = 2 if lstm else 1
    return KernelSource(
        function=name, cuda=cuda, binding=binding,
        launcher_decl=f"{struct}\n{helpers}\n{launcher_sig};",
        python_args=tuple(t.name for t in tensors),
        arg_groups=((1, False), (hx_count, True), (len(spec.weights), True)),
        notes=(f"the {what} in one persistent kernel a launch: each block keeps its units' W_ih and W_hh rows "
               "in shared memory for the whole sequence",
               "layers of a unidirectional stack run as a wavefront (T + L - 1 dependent steps, not T x L), "
               "blocks meeting through a counter a chain under a cooperative launch"),
    )
