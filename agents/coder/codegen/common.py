"""Shared pieces of every emitted kernel: dtype tables, identifier and vector-width rules, the
preludes (loaded from the headers in cuda/), and the assembly of several `KernelSource`s into the
sources of ONE `torch.utils.cpp_extension.load_inline` call.

Both preludes sit under include guards, so any number of kernels can be concatenated into one
translation unit.
"""

from __future__ import annotations

import re

from kernelstitch.agents.coder.codegen import templates
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.plan.kernel_spec import (
    DType,
    ElementwiseOp,
    TensorArg,
)

# Storage types, torch scalar types, element sizes.
# bool: masks read as 0 / 1 (never stored by our kernels).
CUDA_TYPE: dict[str, str] = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "bool": "bool"}
TORCH_DTYPE: dict[str, str] = {"float32": "at::kFloat", "float16": "at::kHalf", "bfloat16": "at::kBFloat16",
                               "bool": "at::kBool"}
ELEMENT_SIZE: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2, "bool": 1}
# Bytes an element counts for in the vector width: a bool as 4, so a mask never makes VEC 16
# (ks_ld_vec reads up to 8 bools at once) and fp32 kernels keep float4 steps.
_VECTOR_SIZE: dict[str, int] = {**ELEMENT_SIZE, "bool": 4}

# Compile and link flags the wrapper must pass to load_inline (GEMM bindings call cuBLASLt).
EXTRA_CUDA_CFLAGS: tuple[str, ...] = ("-O3",)
EXTRA_CFLAGS: tuple[str, ...] = ("-O3",)
EXTRA_LDFLAGS: tuple[str, ...] = ("-lcublasLt",)

MAX_RANK = 6  # operand descriptors collapse dims first; more than this falls back to .contiguous()

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_identifier(name: str) -> str:
    """Spec names become C symbols and Python attribute names."""
    if not _IDENT.match(name):
        raise ValueError(f"kernel name {name!r} is not a valid C/Python identifier")
    return name


def check_inputs(kernel: str, names: list[str], special: list[str | None], first: str) -> None:
    """A spec's input names: at least one, distinct; every name of `special` (the operands with a
    role other than the main tensor's; None: the role is unused) among them; inputs[0] the main
    tensor (`first` says what it must be), none of `special`.  ValueError otherwise."""
    if not names:
        raise ValueError(f"{kernel}: a kernel needs at least one input")
    if len(set(names)) != len(names):
        raise ValueError(f"{kernel}: duplicate input names {names}")
    used = [n for n in special if n is not None]
    for n in used:
        if n not in names:
            raise ValueError(f"{kernel}: {n!r} is not one of the inputs {names}")
    if names[0] in used:
        raise ValueError(f"{kernel}: inputs[0] must be {first}")


def input_checks(name: str, inputs: tuple[TensorArg, ...] | list[TensorArg]) -> str:
    """The binding's `ks_check_tensor` line for each input (`in_0`, `in_1`, ...): CUDA, dtype, the
    first input's device."""
    return "\n  ".join(
        f'ks_check_tensor(in_{k}, "{name}: input {k} ({t.name})", {TORCH_DTYPE[t.dtype]}, device);'
        for k, t in enumerate(inputs))


def operand_params(inputs: tuple[TensorArg, ...] | list[TensorArg], indices: list[int] | None = None) -> str:
    """A kernel's operand parameters: `p{k}` (storage type) and its descriptor `d{k}` for each
    input k (every input, or `indices`)."""
    ks = range(len(inputs)) if indices is None else indices
    return ", ".join(f"const {CUDA_TYPE[inputs[k].dtype]}* __restrict__ p{k}, const __grid_constant__ KsOperand d{k}"
                     for k in ks)


def device_operand_params(inputs: tuple[TensorArg, ...] | list[TensorArg]) -> str:
    """`operand_params` for a __device__ function the kernel passes its operands to (descriptors by
    reference: __grid_constant__ is for kernel parameters only)."""
    return ", ".join(f"const {CUDA_TYPE[t.dtype]}* __restrict__ p{k}, const KsOperand& d{k}"
                     for k, t in enumerate(inputs))


def operand_args(inputs: tuple[TensorArg, ...] | list[TensorArg], indices: list[int] | None = None) -> str:
    """The launcher's arguments for `operand_params`: `ins[k]` cast to its storage type, `descs[k]`."""
    ks = range(len(inputs)) if indices is None else indices
    return ", ".join(f"static_cast<const {CUDA_TYPE[inputs[k].dtype]}*>(ins[{k}]), descs[{k}]" for k in ks)


def one_pass_operands(name: str, inputs: tuple[TensorArg, ...], prologue: tuple[ElementwiseOp, ...],
                      prologue_out: str, what: str) -> dict[str, str]:
    """Template arguments of a one-pass kernel (scan, arg_reduce, triangle) reading the value its
    prologue computes from broadcast `inputs` (the first: the `what` tensor, or the prologue's
    first operand; checked): `params` / `launch_args`, its operands; `value_fn`, the prologue and
    `{name}_value(..., i)` that reads every input at index i and applies it
    (cuda/one_pass/value.cu); `args`, the operands passed on to it."""
    names = [t.name for t in inputs]
    check_inputs(name, names, [], f"the {what} tensor or the prologue's first operand")
    pro = compile_ops(f"{name}_pro", tuple(names), prologue, (prologue_out or names[0],))
    nin = len(inputs)
    value_fn = templates.render(
        "one_pass/value.cu", name=name, pro=pro.source, what=what,
        value_params=device_operand_params(inputs),
        loads="\n  ".join(f"float a{k}[1]; ks_load<1>(p{k}, d{k}, i, a{k});" for k in range(nin)),
        pro_args=", ".join(f"a{k}[0]" for k in range(nin)))
    return {"params": operand_params(inputs), "launch_args": operand_args(inputs), "value_fn": value_fn,
            "args": ", ".join(f"p{k}, d{k}" for k in range(nin))}


def binding_operands(name: str, inputs: tuple[TensorArg, ...] | list[TensorArg]) -> dict[str, str]:
    """Template arguments of a binding over broadcast inputs `in_0..`: its C++ parameters, their
    checks (`input_checks`), the inputs as a list, their addresses and the shape each is
    described against (`s`), their data pointers."""
    ks = range(len(inputs))
    return {
        "nin": str(len(inputs)),
        "cparams": ", ".join(f"at::Tensor in_{k}" for k in ks),
        "checks": input_checks(name, inputs),
        "ins_list": ", ".join(f"in_{k}" for k in ks),
        "in_refs": ", ".join(f"&in_{k}" for k in ks),
        "in_shapes": ", ".join("s" for _ in ks),
        "in_ptrs": ", ".join(f"in_{k}.data_ptr()" for k in ks),
    }


def vector_width(dtypes: list[DType] | tuple[DType, ...]) -> int:
    """Elements per 16-byte access: set by the narrowest storage type so every operand moves whole
    16-byte chunks (an fp32 operand in a kernel with fp16 operands moves two float4s per step)."""
    return 16 // min(_VECTOR_SIZE[d] for d in dtypes)


# The preludes: real headers under cuda/ (see templates.py), inlined into every translation unit
# under include guards.  ks_shared_types.h is plain C++ both units share: the operand descriptor
# (`KsOperand`) and the reduction plan (the binding computes them with torch, the launcher
# consumes them).
SHARED_TYPES = templates.source("ks_shared_types.h")
CUDA_PRELUDE = templates.source("ks_prelude.cuh")  # types, loads/stores, index math, block reductions, math
BINDING_PRELUDE = templates.source("ks_binding.h")  # torch-side checks and operand descriptors

# Values a thread of the block path's scalar (VEC == 1) row kernel caches: the kernel's MAXV
# (reduction/row.py) and the host plan that sizes its blocks read KS_BLOCK_SCALAR_VALUES.
BLOCK_SCALAR_VALUES = templates.define("ks_shared_types.h", "KS_BLOCK_SCALAR_VALUES")


def build_extension_sources(kernels: list[KernelSource]) -> tuple[str, str, list[str]]:
    """(cpp source, cuda source, function names) for one load_inline call over all kernels.

    The cpp source is the binding prelude, every launcher prototype, then every binding; the cuda
    source concatenates the kernels' cuda texts (each starts with the guarded CUDA prelude).
    Kernels whose cuda text is the same but for their own name (a ResNet's twenty identical
    batch_norm + ReLU steps) are compiled once: nvcc's time grows with every instantiation, and
    one translation unit is compiled by one nvcc process.  Each keeps its own function name: a
    copy whose binding is the same too is one line forwarding to the first one's binding (an
    unrolled RNN's 256 identical steps compile one binding body, not 256), else its binding calls
    the first one's launchers.
    """
    names = [k.function for k in kernels]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate kernel names: {dupes}")
    first_of: dict[str, KernelSource] = {}
    decls, bindings, cudas = [], [], []
    for k in kernels:
        canon = first_of.setdefault(renamed_kernel(k.cuda, k.function), k)
        alias = (_forwarding(k, canon) or _as_alias(k, canon)) if canon is not k else None
        if alias is None:
            decls.append(k.launcher_decl)
            bindings.append(k.binding)
            cudas.append(k.cuda)
        else:
            bindings.append(alias)
    # Each binding opens with a mark naming its function, after every binding's prototype, so
    # the build may compile the bindings as several units (the generated wrapper's
    # _binding_units); without a prototype for each, one unit as before.
    prototypes = [_prototype(text, name) for text, name in zip(bindings, names, strict=True)]
    if all(prototypes):
        bindings = ["// binding prototypes: the build may compile the bindings below in several units",
                    *prototypes] + [f"{BINDING_MARK}{name}\n{text}" for text, name in zip(bindings, names, strict=True)]
    # "" first: the assembled source has always opened with an empty line
    cpp = "\n".join(["", BINDING_PRELUDE] + decls + bindings)
    cuda = "\n".join(cudas)
    return cpp, cuda, names


# The line opening each binding in the assembled cpp source (build_extension_sources).
BINDING_MARK = "// ks-binding: "


def _prototype(binding: str, name: str) -> str | None:
    """The declaration of binding function `name` from its definition's head line, or None."""
    head = re.search(rf"^([^\n(;]*?)\b{re.escape(name)}\s*\(([^)]*)\)\s*\{{", binding, re.M)
    if head is None or not head.group(1).strip():
        return None
    return f"{head.group(1).strip()} {name}({head.group(2)});"


def split_extension_kernels(kernels: list[KernelSource], parts: int) -> list[list[KernelSource]]:
    """`kernels` in at most `parts` groups of about equal cuda text, for that many extensions
    built at once: nvcc compiles one translation unit on one core (the GPU tests' largest
    extension took 170-240 s as one unit on a 16-core machine).  Kernels whose cuda texts are
    equal but for their names stay in one group, where build_extension_sources compiles them
    once.  Heaviest family first, each into the lightest group so far; input order kept within
    a group."""
    families: dict[str, list[int]] = {}
    for index, k in enumerate(kernels):
        families.setdefault(renamed_kernel(k.cuda, k.function), []).append(index)
    count = max(1, min(parts, len(families)))
    groups: list[list[int]] = [[] for _ in range(count)]
    weights = [0] * count
    for text, members in sorted(families.items(), key=lambda item: -len(item[0])):
        lightest = weights.index(min(weights))
        groups[lightest] += members
        weights[lightest] += len(text)
    return [[kernels[i] for i in sorted(g)] for g in groups if g]


_PLACEHOLDER = "\0KS_KERNEL\0"
_STRING_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LAUNCHER_NAME = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def renamed_kernel(text: str, name: str, to: str = _PLACEHOLDER) -> str:
    """`text` with the kernel name `name` (and every `name_...` symbol) written `to`: two kernels
    whose texts are equal this way differ only by their names."""
    return re.sub(rf"\b{re.escape(name)}(?=\b|_)", to, text)


def _forwarding(kernel: KernelSource, canon: KernelSource) -> str | None:
    """`kernel`'s binding as one call of `canon`'s, when both bindings are the same but for the
    kernel name and the text of their messages (which name the plan's operands: a failed check
    then names `canon`'s kernel and operands), or None."""
    def code_of(k: KernelSource) -> str:
        return _STRING_LITERAL.sub('""', renamed_kernel(k.binding, k.function))

    if code_of(kernel) != code_of(canon):
        return None
    head = re.search(rf"^([^\n(]*?)\b{re.escape(kernel.function)}\s*\(([^)]*)\)\s*\{{", kernel.binding, re.M)
    if head is None or not head.group(1).strip():
        return None
    params = head.group(2)
    names = [p.strip().split()[-1] for p in params.split(",") if p.strip()]
    if not all(n.isidentifier() for n in names):
        return None
    return (f"\n// {kernel.function}: the same kernel and binding as {canon.function}\n"
            f"{head.group(1).strip()} {kernel.function}({params}) {{ return {canon.function}({', '.join(names)}); }}\n")


def _as_alias(kernel: KernelSource, canon: KernelSource) -> str | None:
    """`kernel`'s binding calling `canon`'s launchers (same cuda text but for the name), or None
    when the launcher prototypes do not correspond one to one (then both are compiled)."""
    mine = _LAUNCHER_NAME.findall(kernel.launcher_decl)
    theirs = _LAUNCHER_NAME.findall(canon.launcher_decl)
    if not mine or len(mine) != len(theirs):
        return None
    if renamed_kernel(kernel.launcher_decl, kernel.function, canon.function) != canon.launcher_decl:
        return None
    binding = kernel.binding
    for own, shared in zip(mine, theirs, strict=True):
        binding = re.sub(rf"\b{re.escape(own)}\b", shared, binding)
    return binding
