"""torch.einsum as one tiled contraction (ContractionSpec, codegen/contraction.py): which einsums
the kernel takes and how their letters split into roles.

The output's letters are batch, m or n by the operands that hold them: with every operand on
side A or B, m letters are held only by side A's operands, n letters only by side B's, batch
letters by both (or by neither side's m/n), and the summed letters are k.  Every output tile
[m, n] of a batch index is then a GEMM over k of two products of operands, each read through
its strides: the permuted copies and the materialised elementwise products torch's pairwise
einsum makes are never written.  The split with the most reuse (largest min(M, N), then M * N)
wins, with an operand on each side where there are two or more.  An einsum whose direct
contraction does much more arithmetic than it moves bytes (a large bmm, a four-operand product
a pairwise order would shrink), or has too few output tiles to fill the GPU over a long sum (a
dot product), stays with torch (cuBLAS, its split reductions).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from kernelstitch.agents.plan.graph import Graph, Node, NodeRef
from kernelstitch.agents.plan.kernel_spec import (
    CONTRACTION_MAX_DIMS,
    CONTRACTION_MAX_INPUTS,
    CONTRACTION_TILES,
    ContractionSpec,
)
from kernelstitch.agents.planner.ops import ELEMENT_SIZE, FLOAT_DTYPES

EINSUM_OP = "aten.einsum.default"
# FLOPs per byte moved above which the direct contraction is compute-bound and a pairwise order
# through cuBLAS (torch.einsum) is the better program: the kernel's FMA tiles reach ~13-32
# TFLOP/s (16x64 to 64x64 tiles) against ~3 TB/s of DRAM, a balance near 4-10 FLOP a byte.
MAX_FLOPS_PER_BYTE = 16
# A contraction of fewer output tiles than this (a dot product, a few long rows) leaves most SMs
# idle while each tile walks a long k serially: torch's reductions split k.
MIN_TILES = 264  # two per SM of an H100
LONG_K = 256


@dataclass(frozen=True)
class ContractionRoles:
    """An einsum's layout (a ContractionSpec whose name, inputs and dtypes the step builder fills
    in: the normalised equation, each operand's side, the letters of each role, the tile) and
    every letter's size."""

    spec: ContractionSpec
    sizes: dict[str, int]

    def size(self, letters: str) -> int:
        return math.prod(self.sizes[c] for c in letters)

    @property
    def flops(self) -> int:
        """Multiply-adds of the direct contraction (each side's product is formed once per staged value)."""
        s = self.spec
        return 2 * self.size(s.batch + s.m + s.n + s.k)


def normalise_equation(equation: str, nops: int) -> tuple[list[str], str] | str:
    """(operand letters, output letters), or why the kernel cannot take the equation."""
    eq = equation.replace(" ", "")
    if "." in eq:
        return "an ellipsis in the equation"
    inputs, arrow, out = eq.partition("->")
    parts = inputs.split(",")
    if len(parts) != nops:
        return f"{len(parts)} operand(s) in the equation for {nops} tensor(s)"
    if not all(p.isalpha() and p.isascii() for p in parts if p) or (out and not (out.isalpha() and out.isascii())):
        return "letters other than a-z / A-Z"
    if any(len(set(p)) != len(p) for p in parts):
        return "a letter repeated within an operand (a diagonal)"
    if not arrow:  # implicit output: the letters that appear once, in alphabetical order
        counts = {c: sum(p.count(c) for p in parts) for c in set("".join(parts))}
        out = "".join(sorted(c for c, n in counts.items() if n == 1))
    if len(set(out)) != len(out) or not set(out) <= set("".join(parts)):
        return "an output letter repeated or in no operand"
    return parts, out


def _letter_sizes(parts: list[str], shapes: list[tuple[int, ...]]) -> dict[str, int] | str:
    sizes: dict[str, int] = {}
    for letters, shape in zip(parts, shapes, strict=True):
        if len(letters) != len(shape):
            return f"an operand of rank {len(shape)} for {len(letters)} letter(s)"
        for c, s in zip(letters, shape, strict=True):
            if sizes.get(c, 1) not in (1, s) and s != 1:
                return f"letter {c!r} of sizes {sizes[c]} and {s}"
            sizes[c] = max(sizes.get(c, 1), s)
    return sizes


def split_roles(parts: list[str], out: str, sizes: dict[str, int]) -> ContractionRoles | str:
    """The side assignment with the most reuse, or why none fits the kernel."""
    summed = "".join(dict.fromkeys(c for p in parts for c in p if c not in out))
    best: tuple[tuple[int, int], ContractionRoles] | None = None
    for sides in itertools.product((0, 1), repeat=len(parts)):
        held = [set("".join(p for p, s in zip(parts, sides, strict=True) if s == side)) for side in (0, 1)]
        m = "".join(c for c in out if c in held[0] and c not in held[1])
        n = "".join(c for c in out if c in held[1] and c not in held[0])
        batch = "".join(c for c in out if c not in m and c not in n)
        if max(len(batch), len(m), len(n), len(summed)) > CONTRACTION_MAX_DIMS:
            continue
        M, N = math.prod(sizes[c] for c in m), math.prod(sizes[c] for c in n)
        roles = ContractionRoles(ContractionSpec(
            name="", inputs=(), equation=f"{','.join(parts)}->{out}", sides=tuple(sides), batch=batch, m=m, n=n,
            k=summed, out_dtype="float32", tile=choose_tile(M, N)), sizes)
        # both sides hold an operand where there are two (a side of none is a product of 1)
        score = (len(set(sides)) == min(2, len(parts)), min(M, N), M * N)
        if best is None or score > best[0]:
            best = (score, roles)
    if best is None:
        return f"more than {CONTRACTION_MAX_DIMS} letters in a role"
    return best[1]


def choose_tile(M: int, N: int) -> tuple[int, int]:
    """The tile that pads the [M, N] output least (the first of CONTRACTION_TILES on ties)."""
    return min(CONTRACTION_TILES, key=lambda t: math.ceil(M / t[0]) * t[0] * math.ceil(N / t[1]) * t[1])


def contraction_roles(graph: Graph, node: Node) -> ContractionRoles | str:
    """The roles of an einsum node our contraction kernel takes, else why it stays in PyTorch."""
    equation = node.arg(0, "equation")
    operands = node.arg(1, "tensors")
    if not isinstance(equation, str) or not isinstance(operands, (list, tuple)) or not operands:
        return "an equation or operands the planner cannot read"
    if len(operands) > CONTRACTION_MAX_INPUTS or not all(isinstance(r, NodeRef) for r in operands):
        return f"more than {CONTRACTION_MAX_INPUTS} operands, or an operand that is not a tensor"
    metas = [graph.node(r.node).meta for r in operands]
    if node.meta is None or any(m is None for m in metas):
        return "operands without shapes"
    if any(m.dtype not in FLOAT_DTYPES for m in metas) or node.meta.dtype not in FLOAT_DTYPES:
        return "non-floating-point tensors"
    parsed = normalise_equation(equation, len(operands))
    if isinstance(parsed, str):
        return parsed
    parts, out = parsed
    sizes = _letter_sizes(parts, [tuple(m.example_shape) for m in metas])
    if isinstance(sizes, str):
        return sizes
    roles = split_roles(parts, out, sizes)
    if isinstance(roles, str):
        return roles
    moved = sum(m.numel * ELEMENT_SIZE[m.dtype] for m in metas) + node.meta.numel * ELEMENT_SIZE[node.meta.dtype]
    if roles.flops > MAX_FLOPS_PER_BYTE * max(moved, 1):
        return (f"compute-bound as one contraction ({roles.flops / max(moved, 1):.0f} FLOP a byte): "
                "torch's pairwise order through cuBLAS")
    s = roles.spec
    tiles = roles.size(s.batch) * math.ceil(roles.size(s.m) / s.tile[0]) * math.ceil(roles.size(s.n) / s.tile[1])
    if tiles < MIN_TILES and roles.size(s.k) > LONG_K:
        return (f"{tiles} output tile(s) over {roles.size(s.k)} summed values: too few to fill the GPU "
                "(torch splits the sum)")
    return roles
