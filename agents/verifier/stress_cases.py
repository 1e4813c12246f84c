"""Which stress cases a problem gets, from the ops its reference dispatched (torch-free).

Softmax and attention kernels fail where random N(0, 1) inputs never go (issue 23):
- large logits: an exponential taken without the row's running maximum overflows, an online
  softmax's rescaling between key tiles meets large steps (inputs.LARGE_INPUT_SCALE);
- fully masked rows: a query that sees no key (inputs.MASKED_ROW_PERIOD), where PyTorch's softmax
  gives NaN and a kernel that skips the row leaves garbage or zeros;
- long sequences: more key tiles than the problem's own length, and a length no tile divides
  (inputs.long_sequence_length).

Each is an extra case judged like every other (the fp32 bound, then the float64 second opinion
for ill-conditioned outputs); the reference task leaves a case out, with a note, when the
reference itself fails on it or gives non-finite outputs there (nothing to judge against).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SOFTMAX_OPS = frozenset({"softmax", "log_softmax", "logsumexp", "_masked_softmax",
                         "_safe_softmax"})
# Ops that check their floating inputs' values on the device (probabilities in [0, 1], rates
# >= 0): scaled inputs would trip a device-side assert, which ends the reference's process.
RANGE_CHECKED_OPS = frozenset({"binary_cross_entropy", "bernoulli", "multinomial", "poisson",
                               "binomial", "_standard_gamma"})
MATMUL_OPS = frozenset({"matmul", "bmm", "baddbmm", "mm", "einsum"})
# Ops that read memory at positions given by values: an index past the end (a position
# embedding's arange over a longer sequence, an index computed from scaled floats) is a
# device-side assert, which meta tensors do not foresee and which ends the reference's process.
INDEXING_OPS = frozenset({"embedding", "embedding_bag", "index_select", "gather", "index", "take",
                          "scatter", "scatter_add", "index_put", "index_add", "one_hot"})


def is_attention_op(op: str) -> bool:
    """SDPA and its backends (`scaled_dot_product_attention`, `_scaled_dot_product_flash_attention`,
    `_flash_attention_forward`...), nn.MultiheadAttention's fused path
    (`_native_multi_head_attention`) and nn.TransformerEncoderLayer's
    (`_transformer_encoder_layer_fwd`)."""
    return ("scaled_dot_product" in op or "attention" in op
            or op.startswith("_transformer_encoder_layer"))


@dataclass(frozen=True)
class StressPlan:
    """The stress cases of one problem and why (the reference task's notes)."""

    large_logits: bool = False
    masked_rows: bool = False
    long_sequence: bool = False
    reason: str = ""

    def transforms(self) -> list[str]:
        """The input transforms of the extra main cases (inputs.TRANSFORMS)."""
        return [name for name, on in (("large_logits", self.large_logits),
                                      ("masked_rows", self.masked_rows)) if on]


def plan_stress(ops: Iterable[str], *, reduced_precision: bool, has_bool_mask: bool) -> StressPlan:
    """`ops`: canonical names of the reference's dispatched ops (op_names.canonical_op);
    `has_bool_mask`: an input is a bool tensor of 2 or more dims.  Large logits only in strict
    fp32: under TF32 / BF16 the products' own rounding grows with the logits, a limit of the
    precision the user chose and not a defect of the kernel."""
    ops = set(ops)
    attention = any(is_attention_op(op) for op in ops)
    softmax = attention or bool(ops & SOFTMAX_OPS)
    if not softmax:
        return StressPlan(reason="")
    range_checked = sorted(ops & RANGE_CHECKED_OPS)
    indexing = sorted(ops & INDEXING_OPS)
    large = not reduced_precision and not range_checked and not indexing
    long_sequence = (attention or bool(ops & MATMUL_OPS)) and not indexing
    why = []
    if range_checked:
        why.append(f"no large-logits case: {', '.join(range_checked)} checks its inputs' range")
    elif reduced_precision:
        why.append("no large-logits case under a reduced precision")
    if indexing:
        why.append(f"no large-logits or long-sequence case: {', '.join(indexing)} reads at "
                   "positions its inputs give (an index past the end is a device-side assert)")
    return StressPlan(large_logits=large, masked_rows=has_bool_mask, long_sequence=long_sequence,
                      reason="; ".join(why))
