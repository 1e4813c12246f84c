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

    launcher_sig = f"void {name}_gelu_launch(void* y, int64_t n, cudaStream_t stream)"
    if exact_gelu:
        cuda = render("gemm/gelu.cu", name=name, t=CUDA_TYPE[dtype], vec=vector_width([dtype]), launcher_sig=launcher_sig)
        decl = launcher_sig + ";"
    else:
        cuda = f"// ---- {name}: cuBLASLt GEMM, epilogue {epilogue}; all work is in the binding ----\n"
        decl = f"// {name}: no CUDA launcher (cuBLASLt only)"

    binding = render(
        "gemm/binding.cpp", name=name, activation=spec.activation, torch_dtype=torch_dtype, w_kn=w_kn,
        w_expr="W" if spec.weight_layout == "kn" else "W^T", bias_expr=" + bias" if has_bias else "",
        bias_param=", at::Tensor bias" if has_bias else "", bias_arg="&bias" if has_bias else "nullptr",
        bias_checks=render("gemm/bias_checks.cpp", name=name, torch_dtype=torch_dtype) if has_bias else "",
        epilogue=epilogue, math=GEMM_MATH[spec.precision], gelu_launch=render("gemm/gelu_launch.cpp", name=name) if exact_gelu else "",
    )
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=decl,
        python_args=("x", "weight") + (("bias",) if has_bias else ()),
        notes=(
            f"cuBLASLt matmul, epilogue {epilogue}" + (" + in-place exact GELU pass" if exact_gelu else ""),
            (GEMM_MATH_NOTE[spec.precision]
             + ", torch stream, cached handle, torch-allocated workspace"),
        ),
    )
