"""Contraction emitter: torch.einsum of 1-4 float operands as one tiled fp32 contraction
(cuda/contraction/), every operand read through its strides, so no permuted copy and no
broadcast product is ever stored.

The spec (ContractionSpec) splits the operands into two sides and the indices into roles: for
every batch position b, out[b, m, n] = sum_k prod_A a[b, m, k] * prod_B b[b, n, k].  The kernel
is an SIMT GEMM over [M, K] x [K, N] tiles: a block of 256 threads per BM x BN output tile of one
batch position (grid flattened over batch x m tiles x n tiles), BK = 16 k values staged a step in
shared memory as the products of each side's operands, RM x RN fp32 accumulators a thread.  The
binding reads every index's size from the operands' shapes (size 1 broadcasts, as in torch) and
hands the kernel the dims and multiply-shift divisors of each role and every operand's strides
per role dim (0 where it lacks the index), so any layout and any number of dims a role (up to
CONTRACTION_MAX_DIMS) take the same compiled kernel; a role may be empty (one position).

Python picks only what the kernel is compiled for: the tile and its per-thread outputs, the dims
of each role, which operands form each side's product, the dtypes, the index -> role tables of
the binding, and whether consecutive threads should take consecutive m or n outputs (the one
holding the output's contiguous last index, so the stores coalesce).
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    input_checks,
)
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import define, render
from kernelstitch.agents.plan.kernel_spec import (
    CONTRACTION_MAX_DIMS,
    CONTRACTION_MAX_INPUTS,
    CONTRACTION_TILES,
    ContractionSpec,
)

FLOATS = ("float32", "float16", "bfloat16")
# Outputs a thread along m and n for each (BM, BN): (BM / RM) * (BN / RN) == 256 threads.
THREAD_OUTPUTS = {(64, 64): (4, 4), (64, 16): (4, 1), (16, 64): (1, 4), (1, 256): (1, 1), (256, 1): (1, 1)}
HEADER = "contraction/ks_contraction.h"  # the kernel's limits (KS_CONTRACTION_*), the same as kernel_spec's
STEP_K = define(HEADER, "KS_CONTRACTION_BK")  # k values staged a step


def _checked_terms(spec: ContractionSpec) -> tuple[list[str], str]:
    """The equation's input terms and output, checked against the spec's sides and roles
    (ValueError naming the kernel otherwise)."""
    name = spec.name
    eq = spec.equation
    if eq.count("->") != 1:
        raise ValueError(f"{name}: equation {eq!r} needs one explicit '->' output")
    lhs, output = eq.split("->")
    terms = lhs.split(",")
    if not 1 <= len(spec.inputs) <= CONTRACTION_MAX_INPUTS:
        raise ValueError(f"{name}: {len(spec.inputs)} inputs; a contraction takes 1..{CONTRACTION_MAX_INPUTS}")
    if len(terms) != len(spec.inputs) or len(spec.sides) != len(spec.inputs):
        raise ValueError(f"{name}: {len(terms)} terms in {eq!r}, {len(spec.sides)} sides, "
                         f"{len(spec.inputs)} inputs")
    for t in [*terms, output]:
        if not all(c.isascii() and c.isalpha() for c in t):
            raise ValueError(f"{name}: equation {eq!r}: indices are letters only")
        if len(set(t)) != len(t):
            raise ValueError(f"{name}: equation {eq!r}: index repeated within {t!r} (diagonals are not taken)")
    for t in spec.inputs:
        if t.dtype not in FLOATS:
            raise ValueError(f"{name}: input {t.name} is {t.dtype}; a contraction reads {'/'.join(FLOATS)}")
    if spec.out_dtype not in FLOATS:
        raise ValueError(f"{name}: output dtype {spec.out_dtype}; a contraction writes {'/'.join(FLOATS)}")
    if tuple(spec.tile) not in CONTRACTION_TILES:
        raise ValueError(f"{name}: tile {tuple(spec.tile)} is not one of {CONTRACTION_TILES}")
    if any(s not in (0, 1) for s in spec.sides):
        raise ValueError(f"{name}: sides {spec.sides} must be 0 (A) or 1 (B)")
    used = "".join(terms)
    if any(c not in used for c in output):
        raise ValueError(f"{name}: output index of {eq!r} in no input")
    side_letters = [set("".join(t for t, s in zip(terms, spec.sides) if s == side)) for side in (0, 1)]
    # roles: batch, m, n in output order, together the output's indices; k the summed ones in
    # order of first appearance
    for role in ("batch", "m", "n"):
        letters = getattr(spec, role)
        if letters != "".join(c for c in output if c in letters) or len(set(letters)) != len(letters):
            raise ValueError(f"{name}: {role} {letters!r} is not a subsequence of the output {output!r}")
    if sorted(spec.batch + spec.m + spec.n) != sorted(output):
        raise ValueError(f"{name}: batch {spec.batch!r}, m {spec.m!r} and n {spec.n!r} do not split the "
                         f"output {output!r}")
    summed = "".join(dict.fromkeys(c for c in used if c not in output))
    if spec.k != summed:
        raise ValueError(f"{name}: k is {spec.k!r}; the summed indices of {eq!r} are {summed!r}")
    for role, own, other in (("m", 0, 1), ("n", 1, 0)):
        for c in getattr(spec, role):
            if c in side_letters[other] or c not in side_letters[own]:
                raise ValueError(f"{name}: {role} index {c!r} must be in side {'AB'[own]}'s operands only")
    for role in ("batch", "m", "n", "k"):
        if len(getattr(spec, role)) > CONTRACTION_MAX_DIMS:
            raise ValueError(f"{name}: {role} {getattr(spec, role)!r} has more than {CONTRACTION_MAX_DIMS} indices")
    return terms, output


def emit_contraction(spec: ContractionSpec) -> KernelSource:
    name = check_identifier(spec.name)
    terms, output = _checked_terms(spec)
    bm, bn = spec.tile
    rm, rn = THREAD_OUTPUTS[(bm, bn)]
    roles = (spec.batch, spec.m, spec.n, spec.k)
    letters = "".join(dict.fromkeys("".join(terms) + output))
    role_of = {c: r for r, word in enumerate(roles) for c in word}
    dim_of = {c: d for word in roles for d, c in enumerate(word)}
    nin = len(spec.inputs)

    def product(side: int) -> str:  # " * value" for each operand of one side, at staged k value kk
        return "".join(f" * ks_ld(p{o} + off[{o}] + koff[buf][{o}][kk])" for o in range(nin) if spec.sides[o] == side)

    launcher_sig = (f"void {name}_launch(const void* const* ins, void* out, const KsContraction& g, "
                    "cudaStream_t stream)")
    cuda = render(
        "contraction/kernel.cu", name=name, equation=spec.equation, bm=bm, bn=bn, rm=rm, rn=rn,
        nb=len(spec.batch), nm=len(spec.m), nn=len(spec.n), nk=len(spec.k), nin=nin,
        m_fast="true" if output and output[-1] in spec.m else "false",
        params=", ".join(f"const {CUDA_TYPE[t.dtype]}* __restrict__ p{o}" for o, t in enumerate(spec.inputs)),
        a_product=product(0), b_product=product(1), out_t=CUDA_TYPE[spec.out_dtype], launcher_sig=launcher_sig,
        launch_args=", ".join(f"static_cast<const {CUDA_TYPE[t.dtype]}*>(ins[{o}])"
                              for o, t in enumerate(spec.inputs)))
    max_rank = max(1, *(len(t) for t in terms))
    binding = render(
        "contraction/binding.cpp", name=name, equation=spec.equation, nin=nin, nletters=len(letters),
        nout=len(output), letters=letters, max_rank=max_rank,
        role_of=", ".join(str(role_of[c]) for c in letters), dim_of=", ".join(str(dim_of[c]) for c in letters),
        in_rank=", ".join(str(len(t)) for t in terms),
        in_letters=", ".join("{" + ", ".join(str(letters.index(c)) for c in t) + "}" for t in terms),
        out_letters=", ".join(str(letters.index(c)) for c in output) or "0",
        cparams=", ".join(f"at::Tensor in_{o}" for o in range(nin)), checks=input_checks(name, spec.inputs),
        in_refs=", ".join(f"&in_{o}" for o in range(nin)), in_ptrs=", ".join(f"in_{o}.data_ptr()" for o in range(nin)),
        out_dtype=TORCH_DTYPE[spec.out_dtype], bm=bm, bn=bn)
    side = lambda s: ", ".join(t.name for t, x in zip(spec.inputs, spec.sides) if x == s) or "none"  # noqa: E731
    return KernelSource(
        function=name, cuda=cuda, binding=binding,
        # the geometry is defined in the binding's own header, after the launcher prototypes
        launcher_decl="struct KsContraction;\n" + launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(f"einsum {spec.equation} as one fp32 contraction: batch {spec.batch!r}, m {spec.m!r} "
               f"(side A: {side(0)}), n {spec.n!r} (side B: {side(1)}), k {spec.k!r}",
               f"{bm}x{bn} output tiles on 256 threads, {rm}x{rn} a thread, k staged {STEP_K} at a time in shared "
               "memory as each side's product; operands read through their strides (multiply-shift index math)"),
    )
