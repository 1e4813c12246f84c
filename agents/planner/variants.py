"""Alternatives where a planning decision is not certain, ranked by a cost model.

The built-in plan's host rules (channels_last for a 2-D convolution, CUDA-graph replay below
64 MB, GEMM epilogues in cuBLASLt) were tuned on examples/ and lose elsewhere.  Instead of
trusting them, the planner proposes the plans that differ in exactly those decisions; the
Verifier times them on the same inputs and the fastest verified one is delivered (or the
original module, when nothing beats it).

Each variant is a whole Plan (bound to its graph) with a name and the decision it changes, so
the coder builds it like any plan and the report can say what was measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from kernelstitch.agents.plan import HostSettings, Plan, PlanStep
from kernelstitch.agents.plan.graph import Graph, NodeRef
from kernelstitch.agents.plan.kernel_spec import GemmSpec, ReductionKnobs, spec_to_json
from kernelstitch.agents.planner.attention import has_attention
from kernelstitch.agents.planner.builtin import (
    channels_last_conv,
    layout_readers,
    measured_layout_conv,
    plan_builtin,
)
from kernelstitch.agents.planner.cost import estimate_ms
from kernelstitch.agents.planner.direct_conv import direct_conv_steps
from kernelstitch.agents.planner.group_norm_stats import NORMALIZATION_OPS
from kernelstitch.agents.planner.ops import CONV_OPS, RECURRENT_LIBRARY_OPS, base_op
from kernelstitch.agents.planner.precision import with_precision

from kernelstitch.core.precision import precision_mode

DEFAULT_VARIANT = "default"


@dataclass(frozen=True)
class PlanVariant:
    name: str  # "default", "nchw", "nograph", "nchw-graph", "gemm-in-pytorch", ...
    reason: str  # the decision it changes, for the report
    plan: Plan


def propose_variants(graph: Graph, limit: int | None = 4,
                     default: Plan | None = None) -> list[PlanVariant]:
    """The built-in plan first (`default`, when the caller planned already), then alternatives
    in decisions it is unsure of, best estimated first; at most `limit` in all (None: every
    one) besides the unranked ones (within_limit).  Every plan is bound to its graph."""
    base = PlanVariant(DEFAULT_VARIANT, "the built-in planner's rules",
                       default if default is not None else plan_builtin(graph))
    others: list[PlanVariant] = []
    if any(channels_last_conv(s, base.plan.graph) for s in base.plan.steps):
        flipped = _with_channels_last(base, not base.plan.host.channels_last)
        others.append(flipped)
        layouts = [base, flipped]
    else:
        layouts = [base]
    if any(measured_layout_conv(s, base.plan.graph) for s in base.plan.steps):
        layouts.append(_with_channels_last_nd(base))
        others.append(layouts[-1])
    for variant in layouts:
        graph_flip = _with_cuda_graph(variant, not variant.plan.host.cuda_graph)
        if graph_flip is not None:
            others.append(graph_flip)
    if has_attention(graph):
        others.append(PlanVariant(
            "attention-written-out", "attention as written (matmul, softmax, matmul in our kernels "
            "and cuBLAS) instead of PyTorch's fused scaled_dot_product_attention",
            plan_builtin(graph, attention=False)))
    if any(s.technique == "fused_attention" for s in base.plan.steps):
        others.append(PlanVariant(
            "attention-in-pytorch", "scaled_dot_product_attention through PyTorch's fused attention "
            "(flash / memory-efficient / cuDNN) instead of our flash-attention kernel",
            plan_builtin(graph, attention_kernels=False)))
    if any((s.spec or {}).get("type") == "cat" for s in base.plan.steps):
        others.append(PlanVariant(
            "cat-in-pytorch", "torch.cat through PyTorch (its batched copy) instead of our "
            "concatenation kernel with the producers' elementwise chains",
            plan_builtin(graph, cat_kernels=False)))
    if any(s.technique == "gemm_epilogue" for s in base.plan.steps):
        others.append(PlanVariant(
            "gemm-in-pytorch", "matmuls through PyTorch (cuBLAS), epilogues in our kernels "
            "instead of cuBLASLt epilogues", plan_builtin(graph, gemm_kernels=False)))
    if any(n.op in NORMALIZATION_OPS for n in graph.nodes):
        gn = PlanVariant("gn-stats", "group_norm as its groups' statistics, the normalization fused into "
                         "the reduction after it (the normalized tensor never stored) instead of the "
                         "group_norm kernel", plan_builtin(graph, group_norm_stats=True))
        if _signature(gn.plan) != _signature(base.plan):
            # the statistics read a channels-last convolution's output as it lies (BatchStatsSpec.
            # groups), so the variant keeps the default's layout
            others.append(gn)
    split = _with_split_tf32(base)
    if split is not None:
        others.append(split)
    others = _distinct(base, others)
    others.sort(key=lambda v: estimate_ms(v.plan))
    # The persistent recurrent kernel, first among the alternatives and on top of `limit`
    # (UNRANKED_VARIANTS): the cost model's roofline sees a few MB of weights where cuDNN's real
    # cost is T x L dependent steps (level3/35-42: 3,072 of them).
    recurrent = _with_recurrent_kernels(base, graph)
    if recurrent is not None:
        others.insert(0, recurrent)
    # Transposed convolutions as 3xTF32, only where the user's convolutions run in strict fp32
    # (precision `strict`: under PyTorch's defaults the original's own convolution is one TF32
    # pass, which three cannot beat), and there first among the alternatives: the cost model
    # cannot see cuDNN's slow strict-fp32 transposed kernels, and the microbenchmark over level 2
    # measured the convolution 2.2-5.4x faster on 21 of 29
    # (bench/results/2026-11-27-h100-3xtf32-transposed).
    # torch's einsum beside our contraction kernel, on top of the limit: the cost model sees the
    # kernel's bytes, not its FMA tiles' speed, and the kernel was written without a GPU run
    # (2026-12-06); the search then always measures which is faster.
    if any((s.spec or {}).get("type") == "contraction" for s in base.plan.steps):
        others.insert(0, PlanVariant(
            "einsum-in-pytorch", "torch.einsum through PyTorch (its pairwise bmm order) instead of "
            "our tiled contraction kernel", plan_builtin(graph, contraction_kernels=False)))
    direct = _with_direct_convs(base)
    if direct is not None:
        others.insert(0, direct)
    strict_convs = precision_mode(base.plan.host.precision).timed_tf32_off
    conv_split = _with_conv_split_tf32(base) if strict_convs else None
    if conv_split is not None:
        others.insert(0, conv_split)
    return within_limit([base, *others], limit)


# Variants the cost model cannot rank, which come on top of any limit rather than in place of a
# ranked alternative: the persistent recurrent kernel (see propose_variants) pushed level3/38's
# 3xtf32 plan, which the search had delivered at 22.2 ms, out of its four variants; the recurrent
# kernel measured 41.7 ms there (H100, bench/results/2026-12-06-h100-s26).
UNRANKED_VARIANTS = frozenset({"recurrent-kernel", "einsum-in-pytorch", "conv-direct"})


def within_limit(variants: list[PlanVariant], limit: int | None) -> list[PlanVariant]:
    """The first `limit` of `variants` (at least one: the default) that the cost model ranks, and
    every unranked one (UNRANKED_VARIANTS) besides, in their order; None: all of them."""
    if limit is None:
        return list(variants)
    kept, ranked = [], 0
    for v in variants:
        if v.name in UNRANKED_VARIANTS:
            kept.append(v)
        elif ranked < max(1, limit):
            kept.append(v)
            ranked += 1
    return kept


def _with_recurrent_kernels(base: PlanVariant, graph: Graph) -> PlanVariant | None:
    """The default plan with its RNN / LSTM / GRU stacks in our persistent recurrent kernel,
    where the kernel takes at least one (None otherwise)."""
    if not any(base.plan.graph.node(n).op in RECURRENT_LIBRARY_OPS for s in base.plan.steps for n in s.nodes
               if s.technique == "library_call"):
        return None
    plan = plan_builtin(graph, recurrent_kernels=True)
    if not any(s.technique == "fused_recurrent" for s in plan.steps):
        return None
    return PlanVariant("recurrent-kernel", "RNN / LSTM / GRU layers in our persistent recurrent kernel "
                       "(weights in shared memory for the whole sequence) instead of cuDNN's call", plan)


# The second round's alternatives for a hot reduction kernel: each flips one knob of the
# coder's default design, and applies where a kernel of the family it changes ran (kernels are
# named `<spec name>_<family>`: ks_s4_softmax_cluster).
@dataclass(frozen=True)
class KnobAlternative:
    suffix: str  # of the variant's name
    knobs: ReductionKnobs
    why: str
    families: tuple[str, ...]  # kernel-name endings whose design it changes


KNOB_ALTERNATIVES: tuple[KnobAlternative, ...] = (
    KnobAlternative("fastexp", ReductionKnobs(fast_exp=True), "__expf in the softmax sums",
                    ("_row",)),
    KnobAlternative("nocluster", ReductionKnobs(cluster=False),
                    "shared-memory column tiles instead of thread-block clusters",
                    ("_cluster",)),
    KnobAlternative("slotloads", ReductionKnobs(batched_loads=False),
                    "group_norm's channels-last apply loading slot by slot (fewer registers)",
                    ("_gn_nhwc_apply",)),
)


def takes_reduction_knobs(step: PlanStep) -> bool:
    """Whether the step's kernel is the reduction emitter's, whose designs the knobs choose (a
    scan's or arg-reduce's `_rows` kernel, also a fused_reduction step, has none)."""
    return (step.spec or {}).get("type") == "reduction"


def _flipped(current: ReductionKnobs | None, alternative: ReductionKnobs) -> ReductionKnobs:
    """`current` (a step's knobs, None: the defaults) with the knobs `alternative` sets away from
    the defaults: a later round's flip keeps an earlier round's choices for the other knobs."""
    default = ReductionKnobs()
    changed = {f.name: getattr(alternative, f.name) for f in fields(ReductionKnobs)
               if getattr(alternative, f.name) != getattr(default, f.name)}
    return replace(current or default, **changed)


def knob_variants(variant: PlanVariant, ran: dict[str, list[str]]) -> list[PlanVariant]:
    """A next round's variants: `variant` (the fastest of the last round) with one reduction
    knob flipped in the steps the profile found hot.  `ran`: hot fused_reduction step id ->
    the names of its kernels that ran."""
    out = []
    for alt in KNOB_ALTERNATIVES:
        steps = [s for s in variant.plan.steps if takes_reduction_knobs(s)
                 and any(f"{(s.spec or {}).get('name')}{family}" in kernel
                         for kernel in ran.get(s.id, ()) for family in alt.families)]
        if not steps:
            continue
        edited = [replace(s, reduction_knobs=_flipped(s.reduction_knobs, alt.knobs)) if s in steps else s
                  for s in variant.plan.steps]
        ids = ", ".join(s.id for s in steps)
        why = f"{alt.why} ({ids})"
        reason = f"{variant.reason}; {why}" if variant.name != DEFAULT_VARIANT else why
        out.append(PlanVariant(_join(variant.name, alt.suffix), reason,
                               replace(variant.plan, steps=edited)))
    return out


def _with_channels_last(variant: PlanVariant, on: bool) -> PlanVariant:
    plan = variant.plan
    steps = layout_readers([replace(s, channels_last=on and channels_last_conv(s, plan.graph))
                            for s in plan.steps], plan.graph, on)
    layout = "NHWC" if on else "NCHW"
    host = replace(plan.host, channels_last=on, reasons=[
        *plan.host.reasons, f"variant: 2-D convolutions in {layout} (measured against the "
                            "default layout)"])
    return PlanVariant(_join(variant.name, "nhwc" if on else "nchw"),
                       f"convolutions in {layout}", replace(plan, steps=steps, host=host))


def _with_channels_last_nd(variant: PlanVariant) -> PlanVariant:
    """3-D and transposed convolutions channels-last (NDHWC / NHWC), measured only."""
    plan = variant.plan
    steps = layout_readers([replace(s, channels_last=True) if measured_layout_conv(s, plan.graph) else s
                            for s in plan.steps], plan.graph, True)
    host = replace(plan.host, channels_last=True, reasons=[
        *plan.host.reasons, "variant: 3-D / transposed convolutions channels-last (NDHWC / "
                            "NHWC; measured against the default layout)"])
    return PlanVariant(_join(variant.name, "ndhwc"), "3-D / transposed convolutions "
                       "channels-last", replace(plan, steps=steps, host=host))


def _with_direct_convs(base: PlanVariant) -> PlanVariant | None:
    """The NCHW plan with its few-input-channel 2-D convolutions computed directly with their
    elementwise epilogues (planner/direct_conv.py); None when none qualifies.  Unranked: the cost
    model knows cuDNN's TF32 tensor cores no better than this kernel's fp32 FMAs (2026-12-07:
    faster on level2/87, 69 and 65, slower on 82; the search decides per problem)."""
    nchw = _with_channels_last(base, False).plan if base.plan.host.channels_last else base.plan
    steps = direct_conv_steps(nchw)
    if steps is None:
        return None
    host = replace(nchw.host, reasons=[*nchw.host.reasons, "variant: few-channel convolutions computed "
                                       "directly with their epilogues (measured against cuDNN)"])
    return PlanVariant("conv-direct", "2-D convolutions of few input channels computed directly in fp32 "
                       "with their elementwise epilogue instead of cuDNN + an epilogue kernel",
                       replace(nchw, steps=steps, host=host))


def _with_split_tf32(variant: PlanVariant) -> PlanVariant | None:
    """The plan with its fp32 cuBLASLt GEMMs as 3xTF32 (three TF32 tensor-core products of split
    operands, fp32's accuracy: cuda/ks_gemm.h); None when it has none.  Faster where the GEMM is
    compute-bound (the splitting pass reads x and W once and writes two copies of each)."""
    def split_gemm(step: PlanStep) -> PlanStep | None:
        spec = step.kernel_spec() if step.technique == "gemm_epilogue" else None
        if isinstance(spec, GemmSpec) and spec.out_dtype == "float32" and not spec.split_tf32:
            return replace(step, spec=spec_to_json(replace(spec, split_tf32=True)))
        return None

    return _with_3xtf32(variant, split_gemm, "3xtf32", "fp32 GEMM(s) as 3xTF32 (split operands on "
                        "TF32 tensor cores, fp32 accuracy)")


def _with_3xtf32(variant: PlanVariant, rewrite: Callable[[PlanStep], PlanStep | None], suffix: str,
                 what: str) -> PlanVariant | None:
    """`variant` with every step `rewrite` turns into its 3xTF32 form (None: left as it is), named
    with `suffix`; None when no step changes, or under a precision opt-in, whose own math
    supersedes 3xTF32 (planner/precision.py)."""
    plan = variant.plan
    if precision_mode(plan.host.precision).reduced:
        return None
    steps = [rewrite(step) or step for step in plan.steps]
    changed = sum(new is not old for new, old in zip(steps, plan.steps))
    if not changed:
        return None
    why = f"{changed} {what}"
    reason = f"{variant.reason}; {why}" if variant.name != DEFAULT_VARIANT else why
    return PlanVariant(_join(variant.name, suffix), reason, replace(plan, steps=steps))


# Transposed convolutions (the only kind measured faster as 3xTF32: ordinary Conv2d / Conv3d were
# 0.35-0.98x) and where their groups argument sits.
TRANSPOSED_CONV_OPS = {"aten.conv_transpose1d.input": 6, "aten.conv_transpose2d.input": 6,
                       "aten.conv_transpose3d.input": 6}


def _splits_as_3xtf32(step: PlanStep, graph: Graph, channels_last: bool) -> bool:
    """A library step running an fp32 transposed convolution with groups 1 on a batched NC...
    input in NCHW order: what the 3xTF32 program (coder/program.py split_convolution) handles."""
    spec = step.spec or {}
    if step.technique != "library_call" or spec.get("type") != "torch_op" or step.is_kernel:
        return False
    node = graph.node(step.nodes[0])
    if node.op not in TRANSPOSED_CONV_OPS or (channels_last and step.channels_last):
        return False
    groups = node.arg(TRANSPOSED_CONV_OPS[node.op], "groups", 1)
    inputs = [a for a in node.args[:2] if isinstance(a, NodeRef)]
    metas = [graph.node(a.node).meta for a in inputs]
    spatial = int(node.op.split("conv_transpose")[1][0])
    return (groups == 1 and len(metas) == 2 and all(m is not None and m.dtype == "float32" for m in metas)
            and metas[0].rank == spatial + 2 and node.meta is not None and node.meta.dtype == "float32")


def _with_conv_split_tf32(variant: PlanVariant) -> PlanVariant | None:
    """The plan with its transposed convolutions as 3xTF32 (operands split into TF32-exact parts
    by our kernel, one TF32 cuDNN convolution over three times the input channels); None when it
    has none."""
    plan = variant.plan

    def split_conv(step: PlanStep) -> PlanStep | None:
        if _splits_as_3xtf32(step, plan.graph, plan.host.channels_last):
            return replace(step, spec={**step.spec, "split_tf32": True})
        return None

    return _with_3xtf32(variant, split_conv, "conv3xtf32", "transposed convolution(s) as 3xTF32 "
                        "(split operands side by side in the input channels, one TF32 convolution; "
                        "fp32 accuracy where the reduction is short)")


def _with_cuda_graph(variant: PlanVariant, on: bool) -> PlanVariant | None:
    plan = variant.plan
    if on and not all(graph_capturable(s, plan.graph) for s in plan.steps
                      if s.technique == "pytorch_fallback"):
        return None  # a fallback op may synchronise or draw random numbers: replay cannot repeat it
    host: HostSettings = replace(plan.host, cuda_graph=on, reasons=[
        *plan.host.reasons, f"variant: CUDA-graph replay {'on' if on else 'off'} (measured "
                            "against the default)"])
    why = f"CUDA-graph replay {'on' if on else 'off'}"
    reason = f"{variant.reason}; {why}" if variant.name != DEFAULT_VARIANT else why
    return PlanVariant(_join(variant.name, "graph" if on else "nograph"), reason,
                       replace(plan, host=host))


# PyTorch ops a CUDA graph captures and replays faithfully: no host synchronisation, output
# sizes that do not depend on the data, no random numbers.  A plan whose fallback steps are all
# of these gets a graph variant (measured like any other; a capture that fails rejects only that
# variant): ViT's patch unfold and class-token cat, DenseNet's cat, Swin's roll / pad.
GRAPH_CAPTURABLE_OPS = frozenset({
    "cat", "stack", "zeros_like", "ones_like", "full_like", "zeros", "ones", "full", "roll",
    "constant_pad_nd", "pad", "flip", "clamp", "cumsum", "cumprod", "argmax", "argmin", "tril",
    "triu", "eq", "ne", "lt", "gt", "le", "ge", "masked_fill", "where", "mul", "add", "sub", "div",
    "unfold", "index", "index_select", "gather", "cross_entropy_loss", "copy", "slice_scatter",
    "select_scatter", "repeat", "expand", "permute", "transpose", "contiguous", "clone",
    # cuDNN's / ATen's batch norm: no synchronisation, no random numbers; in training mode its
    # running-statistics update is a device op each replay repeats, as each eager call does
    "batch_norm",
})


def graph_capturable(step: PlanStep, graph: Graph | None) -> bool:
    """A PyTorch fallback step a CUDA graph can hold (see GRAPH_CAPTURABLE_OPS); `index` only
    with integer indices (a boolean mask's nonzero synchronises with the host)."""
    name = base_op(str((step.spec or {}).get("op", "")))
    if name not in GRAPH_CAPTURABLE_OPS:
        return False
    if name == "index":
        if graph is None:
            return False
        for node_name in step.nodes:
            node = graph.node(node_name)
            indices = node.args[1] if len(node.args) > 1 else []
            for ref in indices if isinstance(indices, (list, tuple)) else [indices]:
                if ref is None:  # a dimension taken whole
                    continue
                meta = graph.node(ref.node).meta if hasattr(ref, "node") else None
                if meta is None or not meta.dtype.startswith(("int", "uint")):
                    return False
    return True


def cudnn_conv_steps(plan: Plan) -> list[PlanStep]:
    """The steps whose convolutions cuDNN runs (library calls, fallbacks)."""
    return [s for s in plan.steps if any(plan.graph.node(n).op in CONV_OPS for n in s.nodes)]


def autotune_variant(variant: PlanVariant) -> PlanVariant | None:
    """`variant` with cuDNN choosing its convolution algorithms by timing them once per shape
    (torch.backends.cudnn.benchmark during forward) instead of by heuristic; None without a
    cuDNN convolution.  Measured only: the autotuned choice can lose (its first call per shape
    pays for the timing; the verifier's warm-up runs it)."""
    plan = variant.plan
    if plan.host.cudnn_benchmark or not cudnn_conv_steps(plan):
        return None
    host = replace(plan.host, cudnn_benchmark=True, reasons=[
        *plan.host.reasons, "variant: cuDNN times its convolution algorithms per shape "
                            "(torch.backends.cudnn.benchmark during forward), measured against "
                            "its heuristic choice"])
    why = "cuDNN's convolution algorithms chosen by timing them (cudnn.benchmark)"
    reason = f"{variant.reason}; {why}" if variant.name != DEFAULT_VARIANT else why
    return PlanVariant(_join(variant.name, "autotune"), reason, replace(plan, host=host))


def has_batch_statistics(plan: Plan) -> bool:
    """Whether the plan computes a training-mode batch_norm's statistics in a kernel of ours."""
    return any((s.spec or {}).get("type") == "batch_stats" for s in plan.steps)


def batch_norm_in_pytorch(variant: PlanVariant, graph: Graph) -> PlanVariant | None:
    """`variant` with every batch_norm left to PyTorch (cuDNN's statistics and normalisation
    kernels) instead of our statistics kernel and fused apply, under the same host decisions
    (layout, CUDA graph, cuDNN autotuning, precision); None without batch statistics of ours.
    Measured only: on 4 x H100 the original replayed from a CUDA graph beat every program of
    ours on ResNet18 (0.64 ms against 0.89), MobileNetV2 and EfficientNetB0
    (bench/results/2026-11-27-h100x4-nhwc-ab), whose forwards are mostly convolutions (the same
    cuDNN calls in both) and batch norms."""
    if not has_batch_statistics(variant.plan):
        return None
    host = variant.plan.host
    plan = with_precision(plan_builtin(graph, batch_norm_kernels=False), host.precision)
    steps = [replace(s, channels_last=host.channels_last and channels_last_conv(s, plan.graph))
             for s in plan.steps]
    if host.cuda_graph and not all(graph_capturable(s, plan.graph) for s in steps
                                   if s.technique == "pytorch_fallback"):
        return None
    why = "batch_norm through PyTorch (cuDNN's kernels) instead of our statistics and apply kernels"
    new_host = replace(host, precision=plan.host.precision, reasons=[*host.reasons, f"variant: {why}"])
    reason = f"{variant.reason}; {why}" if variant.name != DEFAULT_VARIANT else why
    return PlanVariant(_join(variant.name, "bn-in-pytorch"), reason, replace(plan, steps=steps, host=new_host))


def _join(name: str, suffix: str) -> str:
    return suffix if name == DEFAULT_VARIANT else f"{name}-{suffix}"


def _signature(plan: Plan) -> tuple:
    """What makes two plans build different programs."""
    def step_key(s: PlanStep) -> tuple:
        return (s.technique, tuple(s.nodes), repr(s.spec), s.channels_last, s.reduction_knobs)

    return (tuple(step_key(s) for s in plan.steps), plan.host.cuda_graph,
            plan.host.channels_last, plan.host.cudnn_benchmark, repr(plan.graph_edits))


def without_duplicates(variants: list[PlanVariant]) -> list[PlanVariant]:
    """The first of each set of variants that build the same program (a precision opt-in makes a
    3xTF32 variant its base plan again)."""
    return [variants[0], *_distinct(variants[0], variants[1:])] if variants else []


def _distinct(base: PlanVariant, variants: list[PlanVariant]) -> list[PlanVariant]:
    seen = {_signature(base.plan)}
    out = []
    for variant in variants:
        key = _signature(variant.plan)
        if key not in seen:
            seen.add(key)
            out.append(variant)
    return out
