"""Kernel specifications: the contract between the scheduler (what to fuse) and the kernel
emitters (CUDA source for one fused step).

A spec says *what* a kernel computes, never for which shape: every emitted kernel takes its sizes
at run time, so one compiled candidate serves every valid input shape.  All arithmetic happens in
fp32 registers whatever the storage dtype (fp32, fp16, bf16).

Values inside a kernel are named strings.  Tensor inputs are named by `TensorArg.name`; each
`ElementwiseOp` defines `out`; constants are Python floats written into the source.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

DType = Literal["float32", "float16", "bfloat16", "bool", "int64"]  # bool: masks; int64: NllLossSpec targets

# Unary ops: one value argument.  Binary ops: two (value or float constant).
UNARY_OPS = frozenset(
    {
        "neg", "abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal",
        "gelu",  # exact (erf) GELU, torch's default
        "gelu_tanh",  # GELU(approximate='tanh')
        "silu", "softplus", "mish", "elu", "selu", "hardswish", "hardsigmoid", "square",
    }
)
BINARY_OPS = frozenset({"add", "sub", "mul", "div", "maximum", "minimum", "pow", "xlogy"})
# Ops with float attributes in `attrs`:
#   clamp(x) attrs {"min": float|None, "max": float|None}  (also hardtanh, relu6)
#   leaky_relu(x) attrs {"negative_slope": float}
#   where(cond, a, b): three values; cond is compared `!= 0`
ATTR_OPS = frozenset({"clamp", "leaky_relu", "where"})

Operand = str | float


@dataclass(frozen=True)
class TensorArg:
    """A tensor the kernel reads.  At run time it is broadcast (torch rules) to the shape the
    kernel iterates over; the binding passes 0 strides for broadcast dimensions."""

    name: str
    dtype: DType


@dataclass(frozen=True)
class ElementwiseOp:
    op: str
    args: tuple[Operand, ...]
    out: str
    attrs: tuple[tuple[str, float | None], ...] = ()  # sorted (key, value) pairs: hashable

    def attr(self, key: str) -> float | None:
        return dict(self.attrs).get(key)


@dataclass(frozen=True)
class ElementwiseSpec:
    """out_k = f_k(inputs...) for every element of the broadcast shape of the inputs, in one pass.

    `outputs` names the values stored (usually one; several when later steps need intermediates).
    The binding returns one tensor per output, contiguous (channels-last with
    `keep_channels_last` and channels-last inputs), of dtype `out_dtype`.
    """

    name: str
    inputs: tuple[TensorArg, ...]
    ops: tuple[ElementwiseOp, ...]
    outputs: tuple[str, ...]
    out_dtype: DType
    # The inputs that may take the channels-last tiled path (one template instantiation each,
    # nvcc's time grows with them): those of the output's own shape; None: every input.
    tiled_inputs: tuple[int, ...] | None = None
    # The coder keeps the output channels-last when every full-size input is (agents/coder/
    # layout.py: its readers take NHWC): the binding then returns a channels-last tensor.
    keep_channels_last: bool = False


ReductionKind = Literal[
    "sum", "mean", "amax", "amin", "logsumexp",  # produce the reduced shape
    "softmax", "log_softmax", "layer_norm", "group_norm",  # produce the input's shape
]
# The normalising kinds: their output has the input's shape.
NORMALIZING_KINDS = frozenset({"softmax", "log_softmax", "layer_norm", "group_norm"})


@dataclass(frozen=True)
class ReductionSpec:
    """A reduction over one dimension of a tensor seen as [outer, R, inner] (R the reduced
    dimension; `inner == 1` is the common, contiguous last-dim case), with fused elementwise
    prologue and epilogue.

    * `prologue` computes the reduced operand `prologue_out` from `inputs` (all broadcast to the
      shape of `inputs[0]`); empty prologue means `prologue_out == inputs[0].name`.
    * `kind` reduces it along `dim` (normalised at run time; keepdim as given), or along the
      `dim_count` consecutive dims from `dim` on, seen as one dim.
    * layer_norm normalises over the trailing `norm_ndim` dimensions (treated as R) with `eps`;
      `weight`/`bias` name TensorArgs in `inputs` (or None).
    * group_norm normalises each of `groups` channel groups of an [N, C, *] tensor (rows of
      C / groups * prod(*) values, `dim`/`keepdim` unused) with `eps`; `weight`/`bias` are
      per-channel [C] vectors.
    * `epilogue` maps the reduction's result, named `"acc"`, elementwise to the stored output
      `epilogue_out`; epilogue tensor inputs (in `inputs` too) broadcast to the output shape.
    * `trailing`: the reduced dims end at the tensor's last (the captured graph fixes its rank),
      so `inner == 1` for every shape: the column kernels (inner >= 16) are not built.
    """

    name: str
    kind: ReductionKind
    inputs: tuple[TensorArg, ...]
    dim: int
    keepdim: bool
    out_dtype: DType
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""
    epilogue: tuple[ElementwiseOp, ...] = ()
    epilogue_out: str = "acc"
    epilogue_inputs: tuple[str, ...] = ()  # names in `inputs` used only by the epilogue
    norm_ndim: int = 1
    eps: float = 1e-5
    weight: str | None = None
    bias: str | None = None
    groups: int = 1  # group_norm only
    dim_count: int = 1  # reduce kinds: the consecutive dims dim .. dim + dim_count - 1 as one R
    trailing: bool = False
    # group_norm only: the coder keeps the output channels-last (agents/coder/layout.py: its input
    # is NHWC and its readers take NHWC); the NHWC kernels then write it so, others copy it after.
    keep_channels_last: bool = False


ScanKind = Literal["sum", "prod"]


ArgReduceKind = Literal["argmax", "argmin"]


@dataclass(frozen=True)
class ArgReduceSpec:
    """torch.argmax / torch.argmin along `dim` (None: over every element, as torch flattens) of
    the value `prologue` computes from `inputs` (all broadcast to one shape; empty prologue:
    `inputs[0]` itself); int64 indices, the first one on ties, a NaN wins as torch's does."""

    name: str
    kind: ArgReduceKind
    inputs: tuple[TensorArg, ...]
    dim: int | None
    keepdim: bool = False
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""


TriangleKind = Literal["triu", "tril"]


@dataclass(frozen=True)
class TriangleSpec:
    """torch.triu / torch.tril with `diagonal` over the last two dims of the value `prologue`
    computes from `inputs` (all broadcast to one shape; empty prologue: `inputs[0]` itself):
    kept where col - row >= diagonal (triu) or <= diagonal (tril), else 0."""

    name: str
    kind: TriangleKind
    inputs: tuple[TensorArg, ...]
    diagonal: int
    out_dtype: DType
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""


NllReduction = Literal["none", "mean", "sum"]


@dataclass(frozen=True)
class NllLossSpec:
    """cross_entropy's negative log-likelihood: for logits [N, C], int64 targets [N] and each
    row's logsumexp `lse` [N] (a reduction step before it), loss_i = lse_i - logits[i, t_i], 0
    where t_i == ignore_index; `reduction` none ([N]), sum, or mean over the counted rows (0-d)."""

    name: str
    logits: TensorArg
    target: TensorArg
    lse: TensorArg
    reduction: NllReduction
    ignore_index: int
    out_dtype: DType


# Kernels up to 7 x 7: the tap-means kernel keeps one sum a tap (and a row's per column tap) in
# registers; the planner's rewrite and the emitter both hold to it.
CONV_TAP_MEANS_MAX_TAPS = 49


@dataclass(frozen=True)
class ConvTapMeansSpec:
    """For a 2-D convolution of `input` [N, C, H, W] (`transposed`: conv_transpose2d), each kernel
    tap's input summed over the positions that tap carries into the output (0 where it falls on
    padding), divided by the output's spatial size: [C, N, kh * kw] (rewrites._conv_spatial_mean
    then contracts it with the weights).  Every geometry field is an (h, w) pair of constants."""

    name: str
    input: TensorArg
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    output_padding: tuple[int, int]
    transposed: bool


RECURRENT_CELLS = ("lstm", "gru", "rnn_tanh", "rnn_relu")
RECURRENT_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}  # weight rows a hidden unit
RECURRENT_MAX_BATCH_TILE = 16  # batch items the recurrent kernel's lanes accumulate at once
RECURRENT_MAX_BATCH = 1024  # its LSTM cell states live in shared memory, [units][batch]


@dataclass(frozen=True)
class RecurrentSpec:
    """A whole recurrent layer stack (torch's aten.<cell>.input: nn.LSTM / nn.GRU / nn.RNN) as
    the persistent recurrent kernel: `layers` x `directions` chains over the sequence, float32,
    no dropout between layers.  The call is `(input, hx, params)` as aten's (hx: [h0] or
    [h0, c0], params: each chain's w_ih, w_hh[, b_ih, b_hh] in torch's order).  `batch_tile` is
    the batch items a pass of the kernel accumulates (the traced batch, at most 16); any batch
    runs, in passes."""

    name: str
    cell: str  # one of RECURRENT_CELLS
    input: TensorArg
    hidden: TensorArg  # h0
    layers: int
    directions: int  # 1 or 2
    has_biases: bool
    batch_first: bool
    batch_tile: int
    cell_state: TensorArg | None = None  # c0 (LSTM)
    weights: tuple[TensorArg, ...] = ()


@dataclass(frozen=True)
class ScanSpec:
    """A cumulative sum or product (torch.cumsum / torch.cumprod) along `dim` of a tensor seen as
    [outer, R, inner], of the value `prologue` computes from `inputs` (all broadcast to one
    shape; empty prologue: `inputs[0]` itself), accumulated in fp32 and stored as `out_dtype`.
    `reverse` scans from the end of the dim (`x.flip(d).cumsum(d).flip(d)`); `exclusive` leaves the
    value at a position out of its own result (the first result is the identity: 0 or 1)."""

    name: str
    kind: ScanKind
    inputs: tuple[TensorArg, ...]
    dim: int
    out_dtype: DType
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""
    reverse: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class CatSegment:
    """One input of a concatenation: the value `out` computed elementwise by `ops` from the
    inputs `inputs` (indices into CatSpec.inputs) over the segment's own shape; no ops: `out`
    is the input itself."""

    inputs: tuple[int, ...]
    ops: tuple[ElementwiseOp, ...]
    out: str


@dataclass(frozen=True)
class CatSpec:
    """torch.cat of `segments` along `dim`, each segment computed where it is stored: the
    elementwise chains that produced the inputs (a conv's bias and ReLU before an Inception or
    SqueezeNet cat) run inside the copy instead of writing and re-reading their results."""

    name: str
    inputs: tuple[TensorArg, ...]
    segments: tuple[CatSegment, ...]
    dim: int
    out_dtype: DType
    # The coder keeps the result channels-last when every input is (agents/coder/layout.py):
    # a concatenation along the channels of NHWC inputs is one along their last memory dim.
    keep_channels_last: bool = False
    # Inputs NHWC but the result not kept so (a fire module's last cat into the program's NCHW
    # output): the coder asks for the tiled transposing kernel (cuda/cat/kernel.cu), compiled
    # only then (a DenseNet's cats have up to 48 segments each).
    channels_last_inputs: bool = False


PoolKind = Literal["max", "avg", "adaptive_avg"]


@dataclass(frozen=True)
class PoolSpec:
    """Pooling over the trailing `nd` (1-3) spatial dims of an [N, C, *spatial] (or unbatched
    [C, *spatial]) tensor, one output per window, with fused elementwise prologue and epilogue.

    * `prologue` computes the pooled value `prologue_out` from `inputs` (broadcast to the
      input's shape) at every position a window reads; `inputs[0]` is the full-size tensor the
      windows slide over (read through its strides, NCHW or channels-last); `plane_inputs` are
      prologue inputs constant over the spatial dims (a conv bias), read once per window.
    * max/avg: torch's `kernel`, `stride`, `padding`, `dilation` (max only), `ceil_mode`,
      `count_include_pad` and `divisor` (avg's divisor_override, 0 = none), one value per
      spatial dim; adaptive_avg: `output_size` per spatial dim (torch's window bounds).
    * `epilogue` maps the pooled value `"acc"` to the stored `epilogue_out`; epilogue tensor
      inputs (`epilogue_inputs`, in `inputs` too) broadcast to the output shape.
    The output is contiguous whatever the input's memory format.
    """

    name: str
    kind: PoolKind
    inputs: tuple[TensorArg, ...]
    nd: int
    out_dtype: DType
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor: int = 0
    output_size: tuple[int, ...] = ()
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""
    epilogue: tuple[ElementwiseOp, ...] = ()
    epilogue_out: str = "acc"
    epilogue_inputs: tuple[str, ...] = ()
    plane_inputs: tuple[str, ...] = ()
    # The coder keeps the output channels-last for a channels-last input (agents/coder/layout.py)
    keep_channels_last: bool = False


@dataclass(frozen=True)
class BatchStatsSpec:
    """Training-mode batch_norm's statistics: for each channel (dim 1) of an [N, C, *] tensor,
    the mean and 1 / sqrt(biased variance + eps) over every other dim, stored as an fp32
    [2, C] tensor (row 0 the means, row 1 the inverse deviations), with a fused elementwise
    prologue as a reduction's: `inputs[0]` is the full-size tensor, read through its strides;
    `channel_inputs` are prologue inputs constant over all dims but the channel (a conv bias),
    read once per thread.  When `running_mean` / `running_var` name inputs, the kernel updates
    them in place as torch does (`(1 - momentum) * old + momentum * new`, the variance unbiased).
    Normalising with the statistics is elementwise work for the kernels that follow.

    `groups` > 0: group_norm's statistics instead, per (sample n, group of C / groups channels)
    over the group's channels and every dim past 1, stored [2, N * groups] (row n * groups + g);
    no running statistics.  The kernel reads NCHW and channels-last inputs as they lie."""

    name: str
    inputs: tuple[TensorArg, ...]
    eps: float = 1e-5
    momentum: float = 0.1
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""
    channel_inputs: tuple[str, ...] = ()
    running_mean: str | None = None
    running_var: str | None = None
    groups: int = 0


# The merge kernel's parameter block holds this many parts (a DenseNet201 block concatenates 33).
BATCH_STATS_MERGE_MAX_PARTS = 64


@dataclass(frozen=True)
class BatchStatsMergeSpec:
    """Training-mode batch_norm's statistics of a concatenation along the channels from its
    parts' statistics: `inputs` are the parts' [2, C_j] statistics (BatchStatsSpec results of
    the same eps, no running statistics), in concatenation order, then `sizes` (the
    concatenation: the product of its dims but dim 1 is the count of values a channel), then the running
    statistics when named.  Writes [2, C] (the parts' rows side by side, unchanged) and updates
    the running statistics in place as BatchStatsSpec does (the variance, unbiased, recovered
    from 1 / rstd^2 - eps)."""

    name: str
    inputs: tuple[TensorArg, ...]
    parts: int
    eps: float = 1e-5
    momentum: float = 0.1
    running_mean: str | None = None
    running_var: str | None = None


Activation = Literal["none", "relu", "gelu", "gelu_tanh"]


@dataclass(frozen=True)
class ReductionKnobs:
    """Design choices of a reduction kernel that no rule can make for every shape, so the
    measured search varies them (planner/variants.py); the defaults are what the coder emits
    when a plan step names none."""

    fast_exp: bool = False  # __expf (SFU) instead of expf in the row kernels' softmax sums
    cluster: bool = True  # strided softmax kinds try thread-block clusters before column tiles
    # group_norm's channels-last apply loads every slot before its arithmetic (16 loads in flight
    # a thread, 48-64 registers) rather than slot by slot (one in flight, 32 registers)
    batched_loads: bool = True

    def to_json(self) -> dict[str, bool]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Any) -> ReductionKnobs:
        names = [f.name for f in fields(cls)]
        if not isinstance(data, dict) or set(data) - set(names):
            raise ValueError(f"reduction knobs: expected {'/'.join(names)} booleans, got {data!r}")
        values = {k: v for k, v in data.items()}
        if not all(isinstance(v, bool) for v in values.values()):
            raise ValueError(f"reduction knobs: expected booleans, got {data!r}")
        return cls(**values)


@dataclass(frozen=True)
class GemmSpec:
    """y = act(x @ W^T + bias) [* alpha]: a Linear/matmul through cuBLASLt with its epilogue
    fused (bias, relu, gelu), x of shape [..., K], W [N, K] (Linear layout, `weight_layout="nk"`) or
    [K, N] (matmul layout, `"kn"`)."""

    name: str
    x: TensorArg
    weight: TensorArg
    bias: TensorArg | None
    activation: Activation
    out_dtype: DType
    weight_layout: Literal["nk", "kn"] = "nk"
    # the math of the tensor cores (kernelstitch.core.precision): "fp32" follows torch's
    # allow_tf32 for cuBLAS at run time (off under the Verifier); tf32 / bf16 / fp16 are the
    # user's opt-in, fp32 in and out with the products in that precision
    precision: Literal["fp32", "tf32", "bf16", "fp16"] = "fp32"
    # fp32 math as three TF32 tensor-core products of split operands (3xTF32, fp32's accuracy;
    # cuda/ks_gemm.h): a measured variant's choice, meaningful under precision fp32 only
    split_tf32: bool = False


@dataclass(frozen=True)
class AttentionSpec:
    """torch's scaled_dot_product_attention without dropout, as one flash-style kernel:
    softmax(query key^T * scale + mask) value over query [..., Lq, head_dim] and key, value
    [..., Lk, head_dim] with the same leading dims.  `mask`: None, a bool tensor (True takes
    part) or a float one (added to the scores), broadcast to [..., Lq, Lk]; `causal`: key c
    takes part for query r >= c (is_causal, top-left aligned); `score` "relu": relu(scores) v
    (masked scores 0, nothing normalised), the ReLU attention some models write out."""

    name: str
    query: TensorArg
    key: TensorArg
    value: TensorArg
    head_dim: int
    scale: float
    out_dtype: DType
    causal: bool = False
    mask: TensorArg | None = None
    score: Literal["softmax", "relu"] = "softmax"  # relu: relu(scores) v, masked scores 0, no normalising
    mask_nonzero: bool = False  # a float mask whose nonzero entries take part (`x != 0` read in the kernel)
    # the products' math: "fp32" keeps fp32 inputs on the FMA units (strict) and f16 / bf16 inputs
    # on their own tensor-core math; tf32 / bf16 / fp16 are the user's opt-in for fp32 inputs
    precision: Literal["fp32", "tf32", "bf16", "fp16"] = "fp32"


ATTENTION_MAX_HEAD_DIM = 128  # the fp32 (FMA-unit) kernel: larger heads' tiles do not fit shared memory
ATTENTION_MMA_MAX_HEAD_DIM = 256  # the tensor-core kernel (keys in tiles of 32 above 128)
_ATTENTION_FLOATS = ("float32", "float16", "bfloat16")


def attention_uses_tensor_cores(dtype: str, precision: str = "fp32") -> bool:
    """Whether an attention over `dtype` inputs under `precision` runs on the tensor-core kernel:
    16-bit inputs always (their own math, as PyTorch's fused kernels), fp32 only under an opt-in."""
    return dtype in ("float16", "bfloat16") or precision != "fp32"


def attention_kernel_problem(head_dim: int, dtypes: tuple[str, ...], mask_dtype: str | None,
                             precision: str = "fp32") -> str | None:
    """Why the attention kernel cannot take an attention of this head dim, query / key / value
    dtypes, mask dtype (None: no mask) and precision; None when it can."""
    limit = (ATTENTION_MMA_MAX_HEAD_DIM if dtypes and attention_uses_tensor_cores(dtypes[0], precision)
             else ATTENTION_MAX_HEAD_DIM)
    if not 1 <= head_dim <= limit:
        return f"head dim {head_dim} outside 1..{limit}"
    if any(d not in _ATTENTION_FLOATS for d in dtypes) or len(set(dtypes)) != 1:
        return f"query / key / value dtypes {', '.join(dtypes)} (one float dtype needed)"
    if mask_dtype is not None and mask_dtype != "bool" and mask_dtype not in _ATTENTION_FLOATS:
        return f"a {mask_dtype} mask"
    return None


# ---- JSON (Plan.steps[].spec) ---------------------------------------------------------------
# The JSON is the dataclass fields plus `"type"`; tuples become lists, ElementwiseOp attrs a dict.
# A contraction's operands: at most this many (the binding and the kernel hold them in fixed arrays).
CONTRACTION_MAX_INPUTS = 4
CONTRACTION_MAX_DIMS = 4  # indices a role (batch, m, n, k) may hold
CONTRACTION_TILES = ((64, 64), (64, 16), (16, 64), (1, 256), (256, 1))  # (BM, BN): 256 threads each


@dataclass(frozen=True)
class ContractionSpec:
    """torch.einsum of 1-4 float operands as one tiled contraction (cuda/contraction/), every
    operand read through its strides (no permuted copies, no materialised products).

    `equation` is normalised: letters only, explicit output ("bclhn,bhcl,bclhp->bchpn").  Each
    input sits on side 0 (A) or 1 (B) (`sides`); the output's letters split into `batch` (in
    operands of both sides, or of neither side's m/n), `m` (only side A's operands) and `n` (only
    side B's), the summed letters are `k`.  For every batch index, the [m, n] output tile
    accumulates over k the product (over side A's operands) times the product (over side B's),
    in fp32: out[b, m, n] = sum_k prod_A a[b, m, k] * prod_B b[b, n, k].  Role strings list the
    letters in output order (k: in order of first appearance in the inputs); `tile` is (BM, BN),
    one of CONTRACTION_TILES.  The output is contiguous, in the equation's output order."""

    name: str
    inputs: tuple[TensorArg, ...]
    equation: str
    sides: tuple[int, ...]
    batch: str
    m: str
    n: str
    k: str
    out_dtype: DType
    tile: tuple[int, int] = (64, 64)


# Input channels x taps up to which the planner proposes a direct convolution (ConvEpilogueSpec):
# past it the FMAs an output value outweigh the passes over the output the fusion saves.
CONV_EPILOGUE_MAX_REDUCTION = 80
# The direct convolution's block tile (cuda/conv_epilogue/kernel.cu): 4 warps of 8 output
# channels, 8 output rows a thread, one output column a lane; its static shared memory limit.
CONV_EPILOGUE_WARPS, CONV_EPILOGUE_ROWS, CONV_EPILOGUE_COLS = 4, 8, 32
CONV_EPILOGUE_SMEM = 48 * 1024


def conv_epilogue_staged_channels(kernel: tuple[int, int], stride: tuple[int, int], cin: int) -> int:
    """Input channels the direct convolution stages at a time: the most (up to 8, and up to
    C_in) whose input tile and weights fit CONV_EPILOGUE_SMEM; 0 when not even one does."""
    (kh, kw), (sh, sw) = kernel, stride
    tile = ((CONV_EPILOGUE_ROWS - 1) * sh + kh) * ((CONV_EPILOGUE_COLS - 1) * sw + kw)
    per_channel = 4 * (tile + kh * kw * (8 * CONV_EPILOGUE_WARPS + 4))  # weight rows padded by 4
    return max(0, min(8, cin, CONV_EPILOGUE_SMEM // per_channel))


def conv_epilogue_pools(pool: PoolSpec) -> bool:
    """Whether the direct convolution's store can take this pooling: 2-D max / avg windows that
    tile the output (stride = kernel, no padding, no dilation, floor mode), their rows dividing
    the block's and their columns a warp's (shuffles across lanes), NCHW output."""
    return (pool.kind in ("max", "avg") and pool.nd == 2 and len(pool.kernel) == 2
            and tuple(pool.kernel) == tuple(pool.stride) and tuple(pool.padding) == (0, 0)
            and tuple(pool.dilation) in ((1, 1), ()) and not pool.ceil_mode and not pool.keep_channels_last
            and CONV_EPILOGUE_ROWS % pool.kernel[0] == 0 and CONV_EPILOGUE_COLS % pool.kernel[1] == 0)


@dataclass(frozen=True)
class ConvEpilogueSpec:
    """A 2-D convolution (float32, dilation 1, one group, no bias of its own) computed directly
    in fp32 with its epilogue applied before the only store (cuda/conv_epilogue/): an
    elementwise chain, or a pooling whose windows tile the output (stride = kernel, no padding:
    conv_epilogue_pools) with its prologue and epilogue.  The epilogue's input
    `operand` (a pooling's: 0) is the convolution's output, never stored.  The binding takes the
    conv input and weight, then the epilogue's other inputs in order, and returns its outputs,
    contiguous ([N, C_out, H_out, W_out], pooled: [N, C_out, H_out / kh, W_out / kw]).
    `kernel`, `stride`, `padding` are (h, w) constants; `ci_tile` the input channels staged in
    shared memory at a time."""

    name: str
    x: TensorArg
    weight: TensorArg
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    epilogue: ElementwiseSpec | PoolSpec
    operand: int
    ci_tile: int = 8


Spec = (ElementwiseSpec | ReductionSpec | GemmSpec | PoolSpec | BatchStatsSpec | BatchStatsMergeSpec
        | ScanSpec | CatSpec | ArgReduceSpec | TriangleSpec | NllLossSpec | AttentionSpec | ConvTapMeansSpec
        | RecurrentSpec | ContractionSpec | ConvEpilogueSpec)


def _arg(t: TensorArg | None) -> Any:
    return None if t is None else {"name": t.name, "dtype": t.dtype}


def _arg_from(d: Any) -> TensorArg | None:
    return None if d is None else TensorArg(str(d["name"]), d["dtype"])


def _op(op: ElementwiseOp) -> dict[str, Any]:
    return {"op": op.op, "args": list(op.args), "out": op.out, "attrs": dict(op.attrs)}


def _op_from(d: dict[str, Any]) -> ElementwiseOp:
    args = tuple(a if isinstance(a, str) else float(a) for a in d["args"])
    attrs = tuple(sorted((str(k), None if v is None else float(v))
                         for k, v in d.get("attrs", {}).items()))
    return ElementwiseOp(str(d["op"]), args, str(d["out"]), attrs)


def spec_to_json(spec: Spec) -> dict[str, Any]:
    if isinstance(spec, ElementwiseSpec):
        return {"type": "elementwise", "name": spec.name, "inputs": [_arg(t) for t in spec.inputs],
                "ops": [_op(o) for o in spec.ops], "outputs": list(spec.outputs),
                "out_dtype": spec.out_dtype,
                **({} if spec.tiled_inputs is None else {"tiled_inputs": list(spec.tiled_inputs)}),
                **({"keep_channels_last": True} if spec.keep_channels_last else {})}
    if isinstance(spec, CatSpec):
        return {"type": "cat", "name": spec.name, "inputs": [_arg(t) for t in spec.inputs],
                "segments": [{"inputs": list(g.inputs), "ops": [_op(o) for o in g.ops], "out": g.out}
                             for g in spec.segments],
                "dim": spec.dim, "out_dtype": spec.out_dtype,
                **({"keep_channels_last": True} if spec.keep_channels_last else {}),
                **({"channels_last_inputs": True} if spec.channels_last_inputs else {})}
    if isinstance(spec, ArgReduceSpec):
        return {"type": "arg_reduce", "name": spec.name, "kind": spec.kind,
                "inputs": [_arg(t) for t in spec.inputs], "dim": spec.dim, "keepdim": spec.keepdim,
                "prologue": [_op(o) for o in spec.prologue], "prologue_out": spec.prologue_out}
    if isinstance(spec, TriangleSpec):
        return {"type": "triangle", "name": spec.name, "kind": spec.kind,
                "inputs": [_arg(t) for t in spec.inputs], "diagonal": spec.diagonal,
                "out_dtype": spec.out_dtype, "prologue": [_op(o) for o in spec.prologue],
                "prologue_out": spec.prologue_out}
    if isinstance(spec, ConvTapMeansSpec):
        return {"type": "conv_taps", "name": spec.name, "input": _arg(spec.input), "kernel": list(spec.kernel),
                "stride": list(spec.stride), "padding": list(spec.padding), "dilation": list(spec.dilation),
                "output_padding": list(spec.output_padding), "transposed": spec.transposed}
    if isinstance(spec, RecurrentSpec):
        return {"type": "recurrent", "name": spec.name, "cell": spec.cell, "input": _arg(spec.input),
                "hidden": _arg(spec.hidden), "cell_state": _arg(spec.cell_state),
                "weights": [_arg(t) for t in spec.weights], "layers": spec.layers,
                "directions": spec.directions, "has_biases": spec.has_biases,
                "batch_first": spec.batch_first, "batch_tile": spec.batch_tile}
    if isinstance(spec, ConvEpilogueSpec):
        return {"type": "conv_epilogue", "name": spec.name, "x": _arg(spec.x), "weight": _arg(spec.weight),
                "kernel": list(spec.kernel), "stride": list(spec.stride), "padding": list(spec.padding),
                "epilogue": spec_to_json(spec.epilogue), "operand": spec.operand, "ci_tile": spec.ci_tile}
    if isinstance(spec, ContractionSpec):
        return {"type": "contraction", "name": spec.name, "inputs": [_arg(t) for t in spec.inputs],
                "equation": spec.equation, "sides": list(spec.sides), "batch": spec.batch, "m": spec.m,
                "n": spec.n, "k": spec.k, "out_dtype": spec.out_dtype, "tile": list(spec.tile)}
    if isinstance(spec, NllLossSpec):
        return {"type": "nll", "name": spec.name, "logits": _arg(spec.logits), "target": _arg(spec.target),
                "lse": _arg(spec.lse), "reduction": spec.reduction, "ignore_index": spec.ignore_index,
                "out_dtype": spec.out_dtype}
    if isinstance(spec, AttentionSpec):
        return {"type": "attention", "name": spec.name, "query": _arg(spec.query), "key": _arg(spec.key),
                "value": _arg(spec.value), "head_dim": spec.head_dim, "scale": spec.scale,
                "out_dtype": spec.out_dtype, "causal": spec.causal, "mask": _arg(spec.mask), "score": spec.score,
                "mask_nonzero": spec.mask_nonzero,
                **({"precision": spec.precision} if spec.precision != "fp32" else {})}
    if isinstance(spec, ScanSpec):
        return {"type": "scan", "name": spec.name, "kind": spec.kind,
                "inputs": [_arg(t) for t in spec.inputs], "dim": spec.dim, "out_dtype": spec.out_dtype,
                "prologue": [_op(o) for o in spec.prologue], "prologue_out": spec.prologue_out,
                "reverse": spec.reverse, "exclusive": spec.exclusive}
    if isinstance(spec, ReductionSpec):
        return {"type": "reduction", "name": spec.name, "kind": spec.kind,
                "inputs": [_arg(t) for t in spec.inputs], "dim": spec.dim,
                "keepdim": spec.keepdim, "out_dtype": spec.out_dtype,
                "prologue": [_op(o) for o in spec.prologue], "prologue_out": spec.prologue_out,
                "epilogue": [_op(o) for o in spec.epilogue], "epilogue_out": spec.epilogue_out,
                "epilogue_inputs": list(spec.epilogue_inputs), "norm_ndim": spec.norm_ndim,
                "eps": spec.eps, "weight": spec.weight, "bias": spec.bias, "groups": spec.groups,
                "dim_count": spec.dim_count, "trailing": spec.trailing,
                **({"keep_channels_last": True} if spec.keep_channels_last else {})}
    if isinstance(spec, PoolSpec):
        return {"type": "pool", "name": spec.name, "kind": spec.kind,
                "inputs": [_arg(t) for t in spec.inputs], "nd": spec.nd,
                "out_dtype": spec.out_dtype, "kernel": list(spec.kernel),
                "stride": list(spec.stride), "padding": list(spec.padding),
                "dilation": list(spec.dilation), "ceil_mode": spec.ceil_mode,
                "count_include_pad": spec.count_include_pad, "divisor": spec.divisor,
                "output_size": list(spec.output_size),
                "prologue": [_op(o) for o in spec.prologue], "prologue_out": spec.prologue_out,
                "epilogue": [_op(o) for o in spec.epilogue], "epilogue_out": spec.epilogue_out,
                "epilogue_inputs": list(spec.epilogue_inputs),
                "plane_inputs": list(spec.plane_inputs),
                **({"keep_channels_last": True} if spec.keep_channels_last else {})}
    if isinstance(spec, BatchStatsSpec):
        return {"type": "batch_stats", "name": spec.name, "inputs": [_arg(t) for t in spec.inputs],
                "eps": spec.eps, "momentum": spec.momentum,
                "prologue": [_op(o) for o in spec.prologue], "prologue_out": spec.prologue_out,
                "channel_inputs": list(spec.channel_inputs), "running_mean": spec.running_mean,
                "running_var": spec.running_var, **({"groups": spec.groups} if spec.groups else {})}
    if isinstance(spec, BatchStatsMergeSpec):
        return {"type": "batch_stats_merge", "name": spec.name, "inputs": [_arg(t) for t in spec.inputs],
                "parts": spec.parts, "eps": spec.eps, "momentum": spec.momentum,
                "running_mean": spec.running_mean, "running_var": spec.running_var}
    if isinstance(spec, GemmSpec):
        return {"type": "gemm", "name": spec.name, "x": _arg(spec.x), "weight": _arg(spec.weight),
                "bias": _arg(spec.bias), "activation": spec.activation,
                "out_dtype": spec.out_dtype, "weight_layout": spec.weight_layout,
                **({"precision": spec.precision} if spec.precision != "fp32" else {}),
                **({"split_tf32": True} if spec.split_tf32 else {})}
    raise TypeError(f"not a codegen spec: {spec!r}")


def spec_from_json(data: dict[str, Any]) -> Spec:
    kind = data.get("type")
    if kind == "elementwise":
        return ElementwiseSpec(
            name=data["name"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            ops=tuple(_op_from(o) for o in data["ops"]), outputs=tuple(data["outputs"]),
            out_dtype=data["out_dtype"],
            tiled_inputs=None if data.get("tiled_inputs") is None else tuple(int(k) for k in data["tiled_inputs"]),
            keep_channels_last=data.get("keep_channels_last") is True)
    if kind == "cat":
        return CatSpec(
            name=data["name"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            segments=tuple(CatSegment(tuple(int(k) for k in g["inputs"]), tuple(_op_from(o) for o in g["ops"]),
                                      str(g["out"])) for g in data["segments"]),
            dim=int(data["dim"]), out_dtype=data["out_dtype"],
            keep_channels_last=data.get("keep_channels_last") is True,
            channels_last_inputs=data.get("channels_last_inputs") is True)
    if kind == "arg_reduce":
        return ArgReduceSpec(
            name=data["name"], kind=data["kind"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            dim=None if data.get("dim") is None else int(data["dim"]), keepdim=bool(data.get("keepdim", False)),
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""))
    if kind == "triangle":
        return TriangleSpec(
            name=data["name"], kind=data["kind"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            diagonal=int(data["diagonal"]), out_dtype=data["out_dtype"],
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""))
    if kind == "conv_taps":
        pair = lambda key: (int(data[key][0]), int(data[key][1]))  # noqa: E731
        return ConvTapMeansSpec(
            name=data["name"], input=_arg_from(data["input"]), kernel=pair("kernel"), stride=pair("stride"),
            padding=pair("padding"), dilation=pair("dilation"), output_padding=pair("output_padding"),
            transposed=bool(data["transposed"]))
    if kind == "recurrent":
        return RecurrentSpec(
            name=data["name"], cell=data["cell"], input=_arg_from(data["input"]), hidden=_arg_from(data["hidden"]),
            cell_state=_arg_from(data.get("cell_state")), weights=tuple(_arg_from(t) for t in data.get("weights", [])),
            layers=int(data["layers"]), directions=int(data["directions"]), has_biases=bool(data["has_biases"]),
            batch_first=bool(data["batch_first"]), batch_tile=int(data["batch_tile"]))
    if kind == "conv_epilogue":
        pair = lambda key: (int(data[key][0]), int(data[key][1]))  # noqa: E731
        epilogue = spec_from_json(data["epilogue"])
        if not isinstance(epilogue, (ElementwiseSpec, PoolSpec)):
            raise ValueError(f"{data.get('name')}: a conv epilogue must be an elementwise or pooling spec")
        return ConvEpilogueSpec(
            name=data["name"], x=_arg_from(data["x"]), weight=_arg_from(data["weight"]), kernel=pair("kernel"),
            stride=pair("stride"), padding=pair("padding"), epilogue=epilogue, operand=int(data["operand"]),
            ci_tile=int(data.get("ci_tile", 8)))
    if kind == "contraction":
        return ContractionSpec(
            name=data["name"], inputs=tuple(_arg_from(t) for t in data["inputs"]), equation=data["equation"],
            sides=tuple(int(v) for v in data["sides"]), batch=data["batch"], m=data["m"], n=data["n"],
            k=data["k"], out_dtype=data["out_dtype"], tile=(int(data["tile"][0]), int(data["tile"][1])))
    if kind == "nll":
        return NllLossSpec(
            name=data["name"], logits=_arg_from(data["logits"]), target=_arg_from(data["target"]),
            lse=_arg_from(data["lse"]), reduction=data["reduction"], ignore_index=int(data["ignore_index"]),
            out_dtype=data["out_dtype"])
    if kind == "attention":
        return AttentionSpec(
            name=data["name"], query=_arg_from(data["query"]), key=_arg_from(data["key"]),
            value=_arg_from(data["value"]), head_dim=int(data["head_dim"]), scale=float(data["scale"]),
            out_dtype=data["out_dtype"], causal=bool(data.get("causal", False)),
            mask=_arg_from(data.get("mask")), score=data.get("score", "softmax"),
            mask_nonzero=bool(data.get("mask_nonzero", False)), precision=data.get("precision", "fp32"))
    if kind == "scan":
        return ScanSpec(
            name=data["name"], kind=data["kind"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            dim=int(data["dim"]), out_dtype=data["out_dtype"],
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""), reverse=bool(data.get("reverse", False)),
            exclusive=bool(data.get("exclusive", False)))
    if kind == "reduction":
        return ReductionSpec(
            name=data["name"], kind=data["kind"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            dim=int(data["dim"]), keepdim=bool(data["keepdim"]), out_dtype=data["out_dtype"],
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""),
            epilogue=tuple(_op_from(o) for o in data.get("epilogue", [])),
            epilogue_out=data.get("epilogue_out", "acc"),
            epilogue_inputs=tuple(data.get("epilogue_inputs", [])),
            norm_ndim=int(data.get("norm_ndim", 1)), eps=float(data.get("eps", 1e-5)),
            weight=data.get("weight"), bias=data.get("bias"), groups=int(data.get("groups", 1)),
            dim_count=int(data.get("dim_count", 1)), trailing=data.get("trailing") is True,
            keep_channels_last=data.get("keep_channels_last") is True)
    if kind == "pool":
        ints = lambda key: tuple(int(v) for v in data.get(key, []))  # noqa: E731
        return PoolSpec(
            name=data["name"], kind=data["kind"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            nd=int(data["nd"]), out_dtype=data["out_dtype"], kernel=ints("kernel"),
            stride=ints("stride"), padding=ints("padding"), dilation=ints("dilation"),
            ceil_mode=bool(data.get("ceil_mode", False)),
            count_include_pad=bool(data.get("count_include_pad", True)),
            divisor=int(data.get("divisor", 0)), output_size=ints("output_size"),
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""),
            epilogue=tuple(_op_from(o) for o in data.get("epilogue", [])),
            epilogue_out=data.get("epilogue_out", "acc"),
            epilogue_inputs=tuple(data.get("epilogue_inputs", [])),
            plane_inputs=tuple(data.get("plane_inputs", [])),
            keep_channels_last=data.get("keep_channels_last") is True)
    if kind == "batch_stats":
        return BatchStatsSpec(
            name=data["name"], inputs=tuple(_arg_from(t) for t in data["inputs"]),
            eps=float(data.get("eps", 1e-5)), momentum=float(data.get("momentum", 0.1)),
            prologue=tuple(_op_from(o) for o in data.get("prologue", [])),
            prologue_out=data.get("prologue_out", ""),
            channel_inputs=tuple(data.get("channel_inputs", [])),
            running_mean=data.get("running_mean"), running_var=data.get("running_var"),
            groups=int(data.get("groups", 0)))
    if kind == "batch_stats_merge":
        return BatchStatsMergeSpec(
            name=data["name"], inputs=tuple(_arg_from(t) for t in data["inputs"]), parts=int(data["parts"]),
            eps=float(data.get("eps", 1e-5)), momentum=float(data.get("momentum", 0.1)),
            running_mean=data.get("running_mean"), running_var=data.get("running_var"))
    if kind == "gemm":
        return GemmSpec(
            name=data["name"], x=_arg_from(data["x"]), weight=_arg_from(data["weight"]),
            bias=_arg_from(data.get("bias")), activation=data["activation"],
            out_dtype=data["out_dtype"], weight_layout=data.get("weight_layout", "nk"),
            precision=data.get("precision", "fp32"), split_tf32=data.get("split_tf32") is True)
    raise ValueError(f"unknown spec type {kind!r}")
