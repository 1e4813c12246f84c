"""GEMM emitter: y = act(x @ W^T + bias) through cuBLASLt with the epilogue fused
(DEFAULT / BIAS / RELU(_BIAS) / GELU(_BIAS)).

cuBLASLt's GELU epilogue is the tanh approximation, so it serves activation "gelu_tanh"; exact
("gelu", erf) GELU runs the bias epilogue and then one in-place vectorised pass emitted here.

The work is in the binding (compiled with torch's headers, linked with -lcublasLt): torch's current
stream, one cached cuBLASLt handle per device, a workspace from the torch allocator, fp32 compute
(TF32 only when torch allows it for cuBLAS; the spec's precision opt-in picks TF32, bf16 or fp16
tensor cores with fp32 in and out), x [..., K] flattened to [M, K], and the row-major
problem mapped onto column-major cuBLASLt by computing y^T = W x^T.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    vector_width,
)
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    GemmSpec,
)

# The binding's shared C++ (cuBLASLt handle cache, descriptors, the call with a 32 MiB workspace,
# cuBLASLt's recommendation for Hopper) is the header cuda/ks_gemm.h, which cuda/gemm/binding.cpp
# includes; cuda/gemm/gelu.cu is the exact-GELU pass.


# The plan's precision -> ks_gemm.h's KsGemmMath (the compute type of cuBLASLt for fp32 operands).
GEMM_MATH = {"fp32": "KS_GEMM_MATH_FP32", "tf32": "KS_GEMM_MATH_TF32", "bf16": "KS_GEMM_MATH_BF16",
             "fp16": "KS_GEMM_MATH_FP16"}
GEMM_MATH_NOTE = {
    "fp32": "fp32 compute (TF32 only if torch allows it)",
    "tf32": "TF32 tensor cores (the plan's precision opt-in)",
    "bf16": "bf16 tensor cores, fp32 in and out (COMPUTE_32F_FAST_16BF, the plan's precision opt-in)",
    "fp16": "fp16 tensor cores, fp32 in and out (COMPUTE_32F_FAST_16F, the plan's precision opt-in)",
}


SPLIT_TF32_NOTE = ("fp32 as TF32 tensor-core products of split operands (3xTF32: a hi/lo splitting pass, "
                   "x_lo W_hi + x_hi W_lo in one product, x_hi W_hi in K chunks added in fp32; an Inf "
                   "operand may give NaN where fp32 gives Inf)")


CONTIGUOUS_OPERANDS = ("\n  if (!x2.is_contiguous()) x2 = x2.contiguous();"
                       "\n  if (!weight.is_contiguous()) weight = weight.contiguous();")


def uses_split_tf32(spec: GemmSpec) -> bool:
    """3xTF32 serves fp32 operands under strict fp32 only: a precision opt-in computes in its own
    math, and 16-bit operands are on the tensor cores already."""
    return spec.split_tf32 and spec.precision == "fp32" and spec.out_dtype == "float32"


def _epilogue(activation: str, has_bias: bool) -> str:
    act = {"none": "", "relu": "RELU", "gelu_tanh": "GELU", "gelu": ""}[activation]
    if has_bias:
        return f"CUBLASLT_EPILOGUE_{act + '_' if act else ''}BIAS"
    return f"CUBLASLT_EPILOGUE_{act}" if act else "CUBLASLT_EPILOGUE_DEFAULT"


def emit_gemm(spec: GemmSpec) -> KernelSource:
    name = check_identifier(spec.name)
    dtypes = {spec.x.dtype, spec.weight.dtype, spec.out_dtype} | ({spec.bias.dtype} if spec.bias else set())
    if len(dtypes) != 1:
        raise ValueError(f"{name}: cuBLASLt GEMM needs one dtype for x, weight, bias and output, got {sorted(dtypes)}")
    if spec.activation not in ("none", "relu", "gelu", "gelu_tanh"):
        raise ValueError(f"{name}: unknown activation {spec.activation!r}")
    dtype = spec.out_dtype
    torch_dtype = TORCH_DTYPE[dtype]
    exact_gelu = spec.activation == "gelu"
    has_bias = spec.bias is not None
    epilogue = _epilogue(spec.activation, has_bias)
    w_kn = "true" if spec.weight_layout == "kn" else "false"

    split = uses_split_tf32(spec)
    launcher_sig = f"void {name}_gelu_launch(void* y, int64_t n, cudaStream_t stream)"
    split_sig = (f"void {name}_split_launch(const void* src, void* dst, int64_t rows, int64_t len, int64_t src_rs, "
                 "int64_t src_ks, int64_t ld_out, int64_t hi_off, int64_t lo_off, cudaStream_t stream)")
    cuda_parts, decls = [], []
    if exact_gelu:
        cuda_parts.append(render("gemm/gelu.cu", name=name, t=CUDA_TYPE[dtype], vec=vector_width([dtype]),
                                 launcher_sig=launcher_sig))
        decls.append(launcher_sig + ";")
    if split:
        cuda_parts.append(render("gemm/split_tf32.cu", name=name, launcher_sig=split_sig))
        decls.append(split_sig + ";")
    cuda = "".join(cuda_parts) or f"// ---- {name}: cuBLASLt GEMM, epilogue {epilogue}; all work is in the binding ----\n"
    decl = "\n".join(decls) or f"// {name}: no CUDA launcher (cuBLASLt only)"
    gemm_call = (f"ks_gemm_split_tf32(x2, weight, {'&bias' if has_bias else 'nullptr'}, y2, w_kn, {epilogue}, "
                 f"stream, {name}_split_launch);" if split else
                 f"ks_gemm_lt(x2, weight, {'&bias' if has_bias else 'nullptr'}, y2, w_kn, {epilogue}, stream, "
                 f"{GEMM_MATH[spec.precision]});")

    binding = render(
        "gemm/binding.cpp", name=name, activation=spec.activation, torch_dtype=torch_dtype, w_kn=w_kn,
        w_expr="W" if spec.weight_layout == "kn" else "W^T", bias_expr=" + bias" if has_bias else "",
        bias_param=", at::Tensor bias" if has_bias else "",
        bias_checks=render("gemm/bias_checks.cpp", name=name, torch_dtype=torch_dtype) if has_bias else "",
        # cuBLASLt reads contiguous operands; 3xTF32's splitting pass reads strided ones in place
        contiguous_operands="" if split else CONTIGUOUS_OPERANDS,
        gemm_call=gemm_call, gelu_launch=render("gemm/gelu_launch.cpp", name=name) if exact_gelu else "",
    )
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=decl,
        python_args=("x", "weight") + (("bias",) if has_bias else ()),
        notes=(
            f"cuBLASLt matmul, epilogue {epilogue}" + (" + in-place exact GELU pass" if exact_gelu else ""),
            ((SPLIT_TF32_NOTE if split else GEMM_MATH_NOTE[spec.precision])
             + ", torch stream, cached handle, torch-allocated workspace"),
        ),
    )
